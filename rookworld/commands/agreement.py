"""`python -m rookworld.commands.agreement`: how often a label's best move is one a deep search agrees with.

Over a seeded sample of annotated positions, each position is analysed by a deep reference
(`--reference-nodes`, 5M by default) and at every node budget of a ladder, all with one thread, a
cleared hash (a new game per analysis) and MultiPV as in the labels. A budget's label agrees with
the reference when its rank-1 move is the reference's line 1, or another reference line whose eval
is within `--tolerance` pawns of line 1. A rank-1 move outside the reference's lines is given its
deep eval by a search of the reference's budget restricted to that move (Stockfish's `searchmoves`),
and agrees when that eval is within the tolerance of line 1 (e.g. a different mate of the same length).

Agreement is reported for two rank-1 choices: Stockfish's line 1 (`stockfish`, what the labels
keep) and the highest eval over all lines (`by eval`, the earlier labels), where a node limit lets a
line of one iteration less outrank line 1. `--target` picks the smallest budget whose `stockfish`
agreement reaches it; with `--budget-seconds`, `--rows` and `--workers`, among the budgets whose
predicted annotation time for `--rows` positions fits (else the largest that fits). Analyses are cached in `--cache` (JSON, per node budget and FEN) and saved as
they come, so an interrupted run resumes and nothing is recomputed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rookworld.data.positions import BUNDLED
from rookworld.data.records import read_jsonl
from rookworld.stockfish.engine import Engine, Line, analyse_many, engine_config

LADDER = (100_000, 200_000, 400_000, 800_000, 1_600_000)
REFERENCE_NODES = 5_000_000


@dataclass
class AgreementStep:
    nodes: int
    agrees: float          # Stockfish's line 1 is the deep best or within the tolerance of it
    agrees_low: float      # Wilson 95% interval of `agrees`
    agrees_high: float
    exact: float           # Stockfish's line 1 is the deep line 1
    agrees_by_eval: float  # the same for the highest-eval line
    seconds_per_position: float  # engine seconds per position, one thread


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion."""
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def by_eval(lines: tuple[Line, ...]) -> str:
    """The highest-eval line's move (ties: Stockfish's order)."""
    return max(lines, key=lambda line: line.eval).move


def agrees(move: str, reference: tuple[Line, ...], tolerance: float, outside: dict[str, float]) -> bool:
    """`move` is within `tolerance` pawns of the reference's line 1; `outside` holds the deep evals
    of moves that are not among the reference's lines."""
    evals = {line.move: line.eval for line in reference}
    deep = evals.get(move, outside.get(move))
    if deep is None:
        raise KeyError(f"{move}: not in the reference's lines and not evaluated alone")
    return reference[0].eval - deep <= tolerance + 1e-9


class Cache:
    """{nodes: {fen: [[move, eval, depth], ...]}} in a JSON file, saved after every update."""

    def __init__(self, path: str | None) -> None:
        self.path = Path(path) if path else None
        self.data: dict[str, dict[str, list]] = {}
        if self.path and self.path.exists():
            self.data = json.loads(self.path.read_text())["analyses"]

    def get(self, nodes: int, fen: str) -> tuple[Line, ...] | None:
        raw = self.data.get(str(nodes), {}).get(fen)
        return None if raw is None else tuple(Line(*line) for line in raw)

    def put(self, nodes: int, fen: str, lines: tuple[Line, ...], seconds: float) -> None:
        self.data.setdefault(str(nodes), {})[fen] = [[l.move, l.eval, l.depth] for l in lines]
        self.data.setdefault(f"{nodes}:seconds", {})[fen] = seconds

    def seconds(self, nodes: int, fen: str) -> float:
        return self.data[f"{nodes}:seconds"][fen]

    def move_evals(self, nodes: int, fen: str) -> dict[str, float]:
        """Evals of single root moves searched alone at `nodes` ({move: pawns})."""
        return self.data.get(f"{nodes}:move", {}).get(fen, {})

    def put_move_eval(self, nodes: int, fen: str, move: str, value: float) -> None:
        self.data.setdefault(f"{nodes}:move", {}).setdefault(fen, {})[move] = value

    def save(self) -> None:
        if self.path is None:
            return
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"analyses": self.data}, separators=(",", ":")))
        os.replace(temporary, self.path)


def analyse_cached(cache: Cache, fens: list[str], nodes: int, workers: int, hash_mb: int,
                   engine_kwargs: dict) -> list[tuple[Line, ...]]:
    """Every FEN's lines at `nodes`, analysing only those not in the cache (chunks saved as they finish)."""
    missing = [fen for fen in fens if cache.get(nodes, fen) is None]
    chunk = 1 if workers == 1 else 4 * workers
    started = time.monotonic()
    for first in range(0, len(missing), chunk):
        part = missing[first:first + chunk]
        seconds: list[float] = []
        results = analyse_many(part, workers, seconds=seconds, lines=True, nodes=nodes, depth=None,
                               time_limit=None, hash_mb=hash_mb, **engine_kwargs)
        for fen, lines, spent in zip(part, results, seconds):
            cache.put(nodes, fen, lines, spent)
        cache.save()
        done = first + len(part)
        rate = done / max(time.monotonic() - started, 1e-9)
        print(f"nodes {nodes}: {done}/{len(missing)} analysed, ETA {(len(missing) - done) / rate:.0f}s",
              file=sys.stderr, flush=True)
    return [cache.get(nodes, fen) for fen in fens]


def evaluate_outside_moves(cache: Cache, fens: list[str], reference_nodes: int, ladder: tuple[int, ...],
                           hash_mb: int, engine_kwargs: dict) -> None:
    """Give every label's rank-1 move (Stockfish's and the highest-eval line's) that is not among the
    reference's lines its deep eval: a search of the reference's budget restricted to it (cached)."""
    missing = []
    for fen in fens:
        reference = {line.move for line in cache.get(reference_nodes, fen)}
        for nodes in ladder:
            lines = cache.get(nodes, fen)
            for move in (lines[0].move, by_eval(lines)):
                if move not in reference and move not in cache.move_evals(reference_nodes, fen) \
                        and (fen, move) not in missing:
                    missing.append((fen, move))
    if not missing:
        return
    with Engine(**engine_kwargs, nodes=reference_nodes, depth=None, time_limit=None, hash_mb=hash_mb,
                cache_size=0) as engine:
        for done, (fen, move) in enumerate(missing, 1):
            cache.put_move_eval(reference_nodes, fen, move, engine.evaluate_move(fen, move))
            cache.save()
            print(f"moves outside the reference's lines: {done}/{len(missing)} evaluated alone",
                  file=sys.stderr, flush=True)


def agreement_curve(cache: Cache, fens: list[str], reference_nodes: int, ladder: tuple[int, ...],
                    tolerance: float) -> list[AgreementStep]:
    reference = [cache.get(reference_nodes, fen) for fen in fens]
    outside = [cache.move_evals(reference_nodes, fen) for fen in fens]
    steps = []
    for nodes in ladder:
        labels = [cache.get(nodes, fen) for fen in fens]
        hits = sum(agrees(lines[0].move, ref, tolerance, deep)
                   for lines, ref, deep in zip(labels, reference, outside))
        low, high = wilson(hits, len(fens))
        steps.append(AgreementStep(
            nodes=nodes, agrees=hits / len(fens), agrees_low=low, agrees_high=high,
            exact=sum(lines[0].move == ref[0].move for lines, ref in zip(labels, reference)) / len(fens),
            agrees_by_eval=sum(agrees(by_eval(lines), ref, tolerance, deep)
                               for lines, ref, deep in zip(labels, reference, outside)) / len(fens),
            seconds_per_position=sum(cache.seconds(nodes, fen) for fen in fens) / len(fens),
        ))
    return steps


def choose_nodes(steps: list[AgreementStep], target: float, max_seconds_per_position: float = math.inf) -> tuple[int, str]:
    """(nodes, why): the smallest affordable budget whose agreement reaches the target, else the
    largest affordable one."""
    affordable = [step for step in steps if step.seconds_per_position <= max_seconds_per_position]
    if not affordable:
        return steps[0].nodes, "no budget fits the time: the smallest"
    reaching = [step for step in affordable if step.agrees >= target]
    if reaching:
        return reaching[0].nodes, f"the smallest affordable budget with agreement >= {target:.0%}"
    first = next((step.nodes for step in steps if step.agrees >= target), None)
    return affordable[-1].nodes, (f"no affordable budget reaches {target:.0%} (first that does: {first:,} nodes)"
                                  if first else f"no budget reaches {target:.0%}") + ": the largest affordable"


def markdown(steps: list[AgreementStep]) -> str:
    lines = ["| nodes | agrees (Stockfish's line 1) | 95% interval | = deep line 1 | agrees (highest eval) | "
             "engine s/position |", "|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {s.nodes:,} | {100 * s.agrees:.1f}% | {100 * s.agrees_low:.1f}-{100 * s.agrees_high:.1f}% | "
              f"{100 * s.exact:.1f}% | {100 * s.agrees_by_eval:.1f}% | {s.seconds_per_position:.3f} |" for s in steps]
    return "\n".join(lines)


def sample_fens(paths: list[str], sample: int, seed: int) -> list[str]:
    fens = [record["fen"] for path in paths for record in read_jsonl(path)]
    if not 1 <= sample <= len(fens):
        raise ValueError(f"--sample {sample}: must be between 1 and {len(fens)}")
    return random.Random(seed).sample(fens, sample)


def build_parser() -> argparse.ArgumentParser:
    engine = engine_config()
    parser = argparse.ArgumentParser(prog="python -m rookworld.commands.agreement", description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", nargs="+", default=[str(BUNDLED["policy_train"])],
                        help="annotated JSONL files to sample from")
    parser.add_argument("--sample", type=int, default=200, help="positions sampled (seeded)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reference-nodes", type=int, default=REFERENCE_NODES, help="nodes of the deep reference")
    parser.add_argument("--reference-hash-mb", type=int, default=128, help="hash of the deep reference, MiB")
    parser.add_argument("--ladder", type=int, nargs="*", default=list(LADDER), help="label budgets, increasing")
    parser.add_argument("--reference-only", action="store_true", help="analyse the reference only")
    parser.add_argument("--tolerance", type=float, default=0.05, help="pawns below the deep best that still agree")
    parser.add_argument("--target", type=float, default=0.80, help="agreement the chosen budget reaches")
    parser.add_argument("--budget-seconds", type=float, help="wall seconds allowed to annotate --rows positions")
    parser.add_argument("--rows", type=int, help="positions the chosen budget will annotate")
    parser.add_argument("--workers", type=int, default=1, help="engine processes, one thread each")
    parser.add_argument("--engine-path", default=engine["path"], help="default: conf/engine/stockfish.yaml")
    parser.add_argument("--hash-mb", type=int, default=engine["hash_mb"], help="hash of the ladder's analyses")
    parser.add_argument("--multipv", type=int, default=engine["multipv"])
    parser.add_argument("--cache", help="JSON cache of every analysis (read, extended, saved)")
    parser.add_argument("--json", help="write the curve (and the choice) here")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.ladder != sorted(set(args.ladder)) or (not args.ladder and not args.reference_only):
        parser.error(f"--ladder {args.ladder}: needs increasing budgets")
    if (args.budget_seconds is None) != (args.rows is None):
        parser.error("--budget-seconds and --rows go together")
    try:
        fens = sample_fens(args.positions, args.sample, args.seed)
    except ValueError as exc:
        parser.error(str(exc))
    cache = Cache(args.cache)
    engine_kwargs = {"path": args.engine_path, "threads": 1, "multipv": args.multipv}
    analyse_cached(cache, fens, args.reference_nodes, args.workers, args.reference_hash_mb, engine_kwargs)
    if args.reference_only:
        return
    for nodes in args.ladder:
        analyse_cached(cache, fens, nodes, args.workers, args.hash_mb, engine_kwargs)
    evaluate_outside_moves(cache, fens, args.reference_nodes, tuple(args.ladder), args.reference_hash_mb,
                           engine_kwargs)
    steps = agreement_curve(cache, fens, args.reference_nodes, tuple(args.ladder), args.tolerance)
    print(markdown(steps))
    per_position = math.inf if args.budget_seconds is None else args.budget_seconds * args.workers / args.rows
    chosen, why = choose_nodes(steps, args.target, per_position)
    print(f"chosen nodes={chosen}: {why}")
    if args.json:
        result = {"sample": args.sample, "seed": args.seed, "positions": args.positions,
                  "reference_nodes": args.reference_nodes, "reference_hash_mb": args.reference_hash_mb,
                  "tolerance": args.tolerance, "target": args.target, "budget_seconds": args.budget_seconds,
                  "rows": args.rows, "workers": args.workers, "chosen": {"nodes": chosen, "why": why},
                  "steps": [asdict(s) for s in steps]}
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
