"""The seed spread of final held-out eval/score in folders of training logs named <config>_s<seed>.log:
each configuration's sd over its seeds, each configuration's paired differences to the folder's
reference on the same seeds, and both pooled (within configurations, so that what a configuration
changes is not counted as spread):
    python tools/lab/seed_spread.py /tmp/recipe_compare:grpo_rookworld_tiny /tmp/knob_ablation:baseline \
        /tmp/knob_ablation_2:baseline
(the shipped logs are packed: `mkdir -p /tmp/S && tar xJf docs/runs/S/raw.tar.xz -C /tmp/S` for each folder S)
A log without a `final evaluation:` line (a run cut short) is left out and named."""
from __future__ import annotations

import math
import re
import statistics
import sys
from pathlib import Path


def final_score(log: Path) -> float | None:
    lines = [line for line in log.read_text().splitlines() if line.startswith("final evaluation: ")]
    found = re.search(r"eval/score=(-?[\d.]+)", lines[-1]) if lines else None
    return float(found.group(1)) if found else None


def folder_scores(folder: Path) -> dict[str, dict[int, float]]:
    scores: dict[str, dict[int, float]] = {}
    for log in sorted(folder.glob("*_s*.log")):
        config, seed = re.fullmatch(r"(.+)_s(\d+)\.log", log.name).groups()
        score = final_score(log)
        if score is None:
            print(f"  {log}: no final evaluation, left out")
        else:
            scores.setdefault(config, {})[int(seed)] = score
    return scores


def pooled_sd(groups: list[list[float]]) -> tuple[float, int]:
    """sd pooled over groups, each around its own mean; and its degrees of freedom."""
    groups = [g for g in groups if len(g) >= 2]
    dof = sum(len(g) - 1 for g in groups)
    squares = sum((len(g) - 1) * statistics.variance(g) for g in groups)
    return (math.sqrt(squares / dof), dof) if dof else (float("nan"), 0)


def main(arguments: list[str]) -> None:
    all_seeds, all_differences = [], []
    for argument in arguments:
        folder, reference = argument.rsplit(":", 1)
        print(f"{folder} (reference {reference})")
        scores = folder_scores(Path(folder))
        for config, by_seed in sorted(scores.items()):
            values = [by_seed[s] for s in sorted(by_seed)]
            sd = f", sd {statistics.stdev(values):.4f}" if len(values) >= 2 else ""
            line = f"  {config}: " + ", ".join(f"{v:.4f}" for v in values) + sd
            if config != reference:
                shared = sorted(by_seed.keys() & scores[reference].keys())
                differences = [by_seed[s] - scores[reference][s] for s in shared]
                all_differences.append(differences)
                line += "; paired differences " + ", ".join(f"{d:+.4f}" for d in differences)
            all_seeds.append(values)
            print(line)
    seed_sd, seed_dof = pooled_sd(all_seeds)
    difference_sd, difference_dof = pooled_sd(all_differences)
    print(f"pooled seed sd of one configuration: {seed_sd:.4f} ({seed_dof} degrees of freedom)")
    print(f"pooled sd of paired differences: {difference_sd:.4f} ({difference_dof} degrees of freedom); "
          f"sqrt(2) x the seed sd, what pairing that removes nothing would leave: {math.sqrt(2) * seed_sd:.4f}")


if __name__ == "__main__":
    main(sys.argv[1:])
