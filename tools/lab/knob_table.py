"""The knob ablation's table (tools/lab/knob_ablation.sh): per knob, the final held-out metrics' mean over
seeds and, for each, the paired difference to the baseline on the same seeds with its spread:
    python tools/lab/knob_table.py LOG_DIR      # the shipped logs: tar xJf docs/runs/knob_ablation/raw.tar.xz -C LOG_DIR
Logs are <knob>_s<seed>.log; the numbers come from each log's `final evaluation:` line."""
from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

METRICS = ["eval/score", "eval/P/score", "eval/A/score", "eval/A/next_state", "eval/A/next_state/ordinary",
           "eval/A/next_state/capture_promotion", "eval/A/next_state/castling_en_passant",
           "eval/A/next_state/terminal", "eval/A/next_state/illegal", "eval/P/consistency/best_in_moves",
           "eval/P/consistency/moves_legal", "eval/P/consistency/best_top_eval"]


def final_metrics(log: Path) -> dict[str, float] | None:
    lines = [line for line in log.read_text().splitlines() if line.startswith("final evaluation: ")]
    return {k: float(v) for k, v in re.findall(r"(eval/[\w/]+)=(-?[\d.]+)", lines[-1])} if lines else None


def main(folder: str) -> None:
    runs: dict[str, dict[int, dict[str, float]]] = {}
    for log in sorted(Path(folder).glob("*_s*.log")):
        knob, seed = re.fullmatch(r"(.+)_s(\d+)\.log", log.name).groups()
        metrics = final_metrics(log)
        if metrics is None:
            print(f"{log.name}: no final evaluation (see the log)")
            continue
        runs.setdefault(knob, {})[int(seed)] = metrics
    base = runs.pop("baseline")
    print("| knob | " + " | ".join(m.removeprefix("eval/") for m in METRICS) + " |")
    print("|---|" + "---|" * len(METRICS))
    print("| baseline | " + " | ".join(cell([b.get(m) for b in base.values()]) for m in METRICS) + " |")
    for knob, seeds in sorted(runs.items()):
        cells = []
        for metric in METRICS:
            diffs = [seeds[s][metric] - base[s][metric] for s in seeds if s in base
                     and metric in seeds[s] and metric in base[s]]
            cells.append(f"{signed(diffs)}" if diffs else "-")
        print(f"| {knob} (diff) | " + " | ".join(cells) + " |")


def cell(values: list) -> str:
    values = [v for v in values if v is not None]
    return f"{statistics.mean(values):.3f} [{min(values):.3f}, {max(values):.3f}]" if values else "-"


def signed(diffs: list[float]) -> str:
    """Mean paired difference and the per-seed differences (the seed spread)."""
    return f"{statistics.mean(diffs):+.3f} ({', '.join(f'{d:+.3f}' for d in diffs)})"


if __name__ == "__main__":
    main(sys.argv[1])
