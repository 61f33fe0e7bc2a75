"""`python -m rookworld.commands.label_stability`: how stable the engine's best move is as the search grows.

Over a seeded sample of annotated positions, each position is analysed at every limit of a ladder
(nodes per analysis, MultiPV as in the annotations, one thread, cleared hash). For each step it
prints the share of rank-1 moves that stay rank-1 one step further (`stays`), the share whose move
still has the top eval there (`top eval`, counts ties at the top), the share that agree with the
deepest step (`= deepest`), and engine seconds per position (one thread).

`--budget-seconds` with `--rows` and `--workers` also picks a limit: the smallest step after which
one more doubling gains less than `--min-gain` in `stays` (the curve has flattened), among the
steps whose predicted annotation time for `--rows` positions fits the budget; if the curve does not
flatten within the budget, the largest step that fits.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from rookworld.data.records import read_jsonl
from rookworld.data.positions import BUNDLED
from rookworld.stockfish.engine import Candidate, analyse_many, engine_config

LADDER = (25_000, 50_000, 100_000, 200_000, 400_000, 800_000, 1_600_000)


@dataclass
class StabilityStep:
    nodes: int
    stays: float | None      # rank-1 move is rank-1 at the next step
    top_eval: float | None   # rank-1 move has the best eval at the next step (ties count)
    agrees_deepest: float    # rank-1 move is rank-1 at the deepest step
    seconds_per_position: float  # engine seconds per position, one thread


def top_moves(candidates: tuple[Candidate, ...]) -> set[str]:
    """The moves tied for the best eval."""
    return {c.move for c in candidates if c.eval == candidates[0].eval} if candidates else set()


def share(hits: list[bool]) -> float:
    return sum(hits) / len(hits)


def stability_curve(fens: list[str], ladder: tuple[int, ...], workers: int, **engine_kwargs) -> list[StabilityStep]:
    analyses, seconds = [], []
    for nodes in ladder:
        timings: list[float] = []
        analyses.append(analyse_many(fens, workers, seconds=timings, nodes=nodes, depth=None, time_limit=None,
                                     **engine_kwargs))
        seconds.append(sum(timings) / len(timings))
        print(f"nodes {nodes}: {seconds[-1]:.3f} engine s/position", file=sys.stderr, flush=True)
    best = [[c[0].move if c else None for c in step] for step in analyses]
    steps = []
    for k, nodes in enumerate(ladder):
        following = k + 1 < len(ladder)
        steps.append(StabilityStep(
            nodes=nodes,
            stays=share([a == b for a, b in zip(best[k], best[k + 1])]) if following else None,
            top_eval=share([a is None or a in top_moves(c) for a, c in zip(best[k], analyses[k + 1])])
            if following else None,
            agrees_deepest=share([a == b for a, b in zip(best[k], best[-1])]),
            seconds_per_position=seconds[k],
        ))
    return steps


def choose_nodes(steps: list[StabilityStep], max_seconds_per_position: float, min_gain: float) -> tuple[int, str]:
    """(nodes, why): the flattening point among the affordable steps, else the largest affordable."""
    affordable = [s for s in steps if s.seconds_per_position <= max_seconds_per_position]
    if not affordable:
        return steps[0].nodes, "no step fits the budget: the smallest"
    for step, after in zip(steps, steps[1:]):
        if step not in affordable or after.stays is None or step.stays is None:
            continue
        if after.stays - step.stays < min_gain:
            return step.nodes, f"stays gains {after.stays - step.stays:+.3f} (< {min_gain}) one step further"
    return affordable[-1].nodes, "no flattening within the budget: the largest step that fits"


def markdown(steps: list[StabilityStep]) -> str:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    lines = ["| nodes | stays rank-1 at next step | top eval at next step | = deepest | engine s/position |",
             "|---:|---:|---:|---:|---:|"]
    lines += [f"| {s.nodes:,} | {pct(s.stays)} | {pct(s.top_eval)} | {pct(s.agrees_deepest)} | "
              f"{s.seconds_per_position:.3f} |" for s in steps]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    engine = engine_config()
    parser = argparse.ArgumentParser(prog="python -m rookworld.commands.label_stability",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", default=str(BUNDLED["policy_train"]), help="annotated JSONL to sample")
    parser.add_argument("--sample", type=int, default=200, help="positions sampled (seeded)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ladder", type=int, nargs="+", default=list(LADDER), help="nodes per step, increasing")
    parser.add_argument("--workers", type=int, default=1, help="engine processes, one thread each")
    parser.add_argument("--engine-path", default=engine["path"], help="default: conf/engine/stockfish.yaml")
    parser.add_argument("--hash-mb", type=int, default=engine["hash_mb"])
    parser.add_argument("--multipv", type=int, default=engine["multipv"])
    parser.add_argument("--budget-seconds", type=float, help="wall seconds allowed to annotate --rows positions")
    parser.add_argument("--rows", type=int, help="positions the chosen limit will annotate")
    parser.add_argument("--min-gain", type=float, default=0.02, help="stays gain per step below which it is flat")
    parser.add_argument("--json", help="write the curve (and the choice) here")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.ladder != sorted(set(args.ladder)) or len(args.ladder) < 2:
        parser.error(f"--ladder {args.ladder}: needs at least two increasing limits")
    if (args.budget_seconds is None) != (args.rows is None):
        parser.error("--budget-seconds and --rows go together")
    records = read_jsonl(args.positions)
    if not 1 <= args.sample <= len(records):
        parser.error(f"--sample {args.sample}: must be between 1 and {len(records)} ({args.positions})")
    fens = [r["fen"] for r in random.Random(args.seed).sample(records, args.sample)]
    engine_kwargs = {"path": args.engine_path, "threads": 1, "hash_mb": args.hash_mb, "multipv": args.multipv}
    steps = stability_curve(fens, tuple(args.ladder), args.workers, **engine_kwargs)
    print(markdown(steps))
    result: dict = {"sample": args.sample, "seed": args.seed, "positions": args.positions,
                    "workers": args.workers, "steps": [asdict(s) for s in steps]}
    if args.budget_seconds is not None:
        nodes, why = choose_nodes(steps, args.budget_seconds * args.workers / args.rows, args.min_gain)
        result["chosen"] = {"nodes": nodes, "why": why}
        print(f"chosen nodes={nodes}: {why}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
