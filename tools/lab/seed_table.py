"""Held-out metrics of several seeds of several recipes, from their training logs, as a markdown table:
    mkdir -p /tmp/rc && tar xJf docs/runs/recipe_compare/raw.tar.xz -C /tmp/rc    # the shipped logs, packed
    python tools/lab/seed_table.py /tmp/rc/grpo_rookworld_tiny_s[0-9].log -- /tmp/rc/grpo_rookworld_tiny_swept_s*.log
Each group of logs (separated by --) is one recipe: per metric, the mean over its seeds and the spread
(max - min), from each log's `final evaluation:` line."""
from __future__ import annotations

import re
import sys
from pathlib import Path

METRICS = ["eval/score", "eval/P/score", "eval/P/format", "eval/P/legal_best", "eval/P/best_move", "eval/P/top5",
           "eval/A/score", "eval/A/format", "eval/A/next_state", "eval/A/reward", "eval/A/terminated",
           "eval/A/truncated"]


def final_metrics(log: Path) -> dict[str, float]:
    lines = [line for line in log.read_text().splitlines() if line.startswith("final evaluation: ")]
    if not lines:
        raise SystemExit(f"{log}: no 'final evaluation:' line (did the run finish?)")
    return {k: float(v) for k, v in re.findall(r"(eval/[\w/]+)=(-?[\d.]+)", lines[-1])}


def groups(argv: list[str]) -> list[list[Path]]:
    result, current = [], []
    for arg in argv:
        if arg == "--":
            result.append(current)
            current = []
        else:
            current.append(Path(arg))
    return [g for g in result + [current] if g]


def main(argv: list[str]) -> None:
    recipes = groups(argv)
    names = [re.sub(r"_s\d+\.log$", "", g[0].name) for g in recipes]
    print("| metric | " + " | ".join(f"{n} (mean, spread over {len(g)} seeds)" for n, g in zip(names, recipes)) + " |")
    print("|---|" + "---|" * len(recipes))
    runs = [[final_metrics(log) for log in g] for g in recipes]
    for metric in METRICS:
        cells = []
        for group in runs:
            values = [run[metric] for run in group]
            cells.append(f"{sum(values) / len(values):.3f} ({max(values) - min(values):.3f}): "
                         + ", ".join(f"{v:.3f}" for v in values))
        print(f"| {metric} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
