"""The evaluation-size noise table: the seed spread of the final held-out eval/score against its evaluation
noise, at several evaluation sizes. Reads the `metrics {...}` lines that `python -m rookworld.bench.eval_time`
prints, from logs named final_s<seed>_n<N>.log (tools/noise_table_device.sh writes them):
    python tools/noise_table.py /tmp/out/noise
Per size N (N P: + N A: validation problems): the sd of eval/score over the seeds (seed spread: training
noise plus evaluation noise), the mean eval/score_se (evaluation noise alone: the standard error from the
per-problem scores) and their ratio; the sweeps' sizes aim at evaluation noise <= half the seed spread."""
from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path


def read(folder: Path) -> dict[int, dict[int, dict[str, float]]]:
    """size -> seed -> metrics."""
    table: dict[int, dict[int, dict[str, float]]] = {}
    for log in sorted(folder.glob("final_s*_n*.log")):
        seed, size = map(int, re.fullmatch(r"final_s(\d+)_n(\d+)\.log", log.name).groups())
        lines = [line for line in log.read_text().splitlines() if line.startswith("metrics ")]
        if not lines:
            print(f"  {log}: no metrics line, left out")
            continue
        table.setdefault(size, {})[seed] = json.loads(lines[-1].removeprefix("metrics "))
    return table


def main(folder: str) -> None:
    table = read(Path(folder))
    print("| problems (P: + A:) | seeds | mean eval/score | seed spread (sd) | evaluation SE (mean) | SE / spread |")
    print("|---|---|---|---|---|---|")
    for size in sorted(table):
        runs = table[size]
        scores = [m["eval/score"] for m in runs.values()]
        errors = [m["eval/score_se"] for m in runs.values()]
        spread = statistics.stdev(scores) if len(scores) >= 2 else float("nan")
        se = statistics.fmean(errors)
        print(f"| {size} + {size} | {len(scores)} | {statistics.fmean(scores):.4f} | {spread:.4f} | {se:.4f} | "
              f"{se / spread:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
