"""The evaluation-size noise table of docs/lab/evaluation-noise.md (rookworld.stats.eval_noise), from the per-problem scores
that tools/lab/noise_table_runs.sh writes (scores_s<seed>_step<step>.json, `python -m rookworld.bench.eval_time
--scores`: each seed's model evaluated on the first 1,500 P: + 1,500 A: validation problems):
    tar xJf docs/runs/noise_table/scores_and_logs.tar.xz -C /tmp    # the shipped run's scores
    python tools/lab/noise_table.py /tmp/noise --sizes 64 128 256 512 1024 1500
One table per training step found; the last line names, per step, the smallest size whose evaluation noise
is at most half the training spread."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
import re

from rookworld.stats.eval_noise import noise_table, smallest_size


def read(folder: Path) -> dict[int, tuple[list[str], dict[int, list[float]]]]:
    """step -> (the problems' tasks, seed -> per-problem scores)."""
    steps: dict[int, tuple[list[str], dict[int, list[float]]]] = {}
    for path in sorted(folder.glob("scores_s*_step*.json")):
        seed, step = map(int, re.fullmatch(r"scores_s(\d+)_step(\d+)\.json", path.name).groups())
        data = json.loads(path.read_text())
        tasks, runs = steps.setdefault(step, (data["tasks"], {}))
        if data["tasks"] != tasks:
            raise SystemExit(f"{path}: other problems than the other seeds of step {step}")
        runs[seed] = data["problem_scores"]
    if not steps:
        raise SystemExit(f"{folder}: no scores_s<seed>_step<step>.json files")
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 1500])
    args = parser.parse_args()
    choices = []
    for step, (tasks, runs) in sorted(read(args.folder).items()):
        rows = noise_table(tasks, [runs[seed] for seed in sorted(runs)], args.sizes)
        reference = rows[-1].training
        print(f"\nstep {step}, seeds {sorted(runs)}:\n")
        print("| problems (P: + A:) | mean eval/score | observed spread (sd) | absolute SE | evaluation noise "
              "| training spread | noise / training spread |")
        print("|---|---|---|---|---|---|---|")
        for row in rows:
            print(f"| {row.size} + {row.size} | {row.mean:.4f} | {row.observed:.4f} | {row.absolute_se:.4f} | "
                  f"{row.noise:.4f} | {row.training:.4f} | {f'{row.noise / reference:.2f}' if reference else 'n/a'} |")
        choices.append(f"step {step}: {smallest_size(rows)}")
    print("\nsmallest size with evaluation noise <= half the training spread (at the largest size): "
          + ", ".join(choices))


if __name__ == "__main__":
    main()
