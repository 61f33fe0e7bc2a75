"""`python -m rookworld.commands.action_value_agreement`: how close action values at a node budget per move
come to the positions' deep labels.

Over a seeded sample of annotated positions, every legal move is valued at each budget of a ladder
(one `searchmoves` search per move, one thread, cleared hash: rookworld/data/action_values.py) and
compared with the position's labels, a deep MultiPV 5 search (1,600,000 nodes for the bundled data):

- best agrees: the best action-valued move is the label's line 1, or another label line within
  `--tolerance` pawns of it (as in `python -m rookworld.commands.agreement`);
- deep best's loss: the win-probability loss the action values give the label's line-1 move (0 when
  they rank it best): what a move-value reward would wrongly take from a model playing the deep best;
- value error: the mean absolute difference in win probability between a label line's eval and its
  move's action value, over the labels' lines.

Win probability: the move-value reward's (rookworld/tasks/move_values.py: Lichess's logistic on
centipawns clipped to +-1000; a mate is 1 or 0).
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass

from scipy.stats import binomtest

from rookworld.data.action_values import values_in_order
from rookworld.data.records import read_jsonl
from rookworld.stockfish.engine import engine_config
from rookworld.tasks.move_values import win_probability

@dataclass(frozen=True)
class LabelComparison:
    best_agrees: bool
    deep_best_loss: float  # win probability
    value_error: float     # win probability, mean over the label's lines


def compare(record: dict, values: list[list], tolerance: float) -> LabelComparison:
    """One position's action values against its labels (`candidates`, Stockfish's line 1 first)."""
    labels = {candidate["move"]: candidate["eval"] for candidate in record["candidates"]}
    line_1 = record["candidates"][0]
    by_move = dict((move, value) for move, value in values)
    best_move, best_value = values[0]
    best_agrees = best_move in labels and line_1["eval"] - labels[best_move] <= tolerance + 1e-9
    deep_best_loss = win_probability(best_value) - win_probability(by_move[line_1["move"]])
    value_error = sum(abs(win_probability(by_move[move]) - win_probability(value))
                      for move, value in labels.items()) / len(labels)
    return LabelComparison(best_agrees, deep_best_loss, value_error)


def ladder_row(nodes: int, comparisons: list[LabelComparison], seconds: float) -> str:
    n = len(comparisons)
    hits = sum(c.best_agrees for c in comparisons)
    interval = binomtest(hits, n).proportion_ci(method="wilson")
    return (f"| {nodes:,} | {100 * hits / n:.1f}% | {100 * interval.low:.1f}-{100 * interval.high:.1f}% | "
            f"{100 * sum(c.deep_best_loss for c in comparisons) / n:.2f} | "
            f"{100 * sum(c.value_error for c in comparisons) / n:.2f} | {seconds / n:.2f} |")


HEADER = ("| nodes per move | best agrees | 95% interval | deep best's loss (win %) | value error (win %) | "
          "engine s/position |\n|---:|---:|---:|---:|---:|---:|")


def build_parser() -> argparse.ArgumentParser:
    engine = engine_config()
    parser = argparse.ArgumentParser(prog="python -m rookworld.commands.action_value_agreement",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", required=True, help="annotated JSONL (with deep labels) to sample from")
    parser.add_argument("--sample", type=int, default=30, help="positions sampled (seeded)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ladder", type=int, nargs="+", default=[2_000, 10_000, 50_000], help="nodes per move")
    parser.add_argument("--tolerance", type=float, default=0.05, help="pawns below the label's line 1 that agree")
    parser.add_argument("--workers", type=int, default=1, help="engine processes, one thread each")
    parser.add_argument("--engine-path", default=engine["path"], help="default: conf/engine/stockfish.yaml")
    parser.add_argument("--hash-mb", type=int, default=engine["hash_mb"])
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    records = [record for record in read_jsonl(args.positions) if record.get("candidates")]
    if not 1 <= args.sample <= len(records):
        parser.error(f"--sample {args.sample}: must be between 1 and {len(records)}")
    sample = random.Random(args.seed).sample(records, args.sample)
    print(HEADER)
    for nodes in args.ladder:
        engine = {"path": args.engine_path, "hash_mb": args.hash_mb, "nodes": nodes, "depth": None,
                  "time_limit": None, "threads": 1, "cache_size": 0}
        started = time.perf_counter()
        results = list(values_in_order((record["fen"] for record in sample), args.workers, engine))
        wall = time.perf_counter() - started
        comparisons = [compare(record, values, args.tolerance) for record, (values, _) in zip(sample, results)]
        print(ladder_row(nodes, comparisons, sum(seconds for _, seconds in results)), flush=True)
        print(f"{nodes:,} nodes per move: {wall:.0f} s wall on {args.workers} workers", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
