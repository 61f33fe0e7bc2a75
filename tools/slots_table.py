"""The table of tools/slots_bench.sh: N GRPO runs at once on one GPU.

    python tools/slots_table.py OUT            # the table
    python tools/slots_table.py OUT --best     # the number of runs at once with the most steps/s in all

Reads OUT/nN/run_K.log (the runs' `step i/S | ... | T s` lines), OUT/nN/smi.csv (nvidia-smi: time,
utilisation %, memory MiB) and OUT/nN/wall_s. A run's rate is 1 / its median step time after the first
WARMUP steps (CUDA graphs are captured then); the total is the sum over the N runs, and the gain is the total
over the rate of one run alone. Utilisation is the mean of the samples while the GPU was busy at all (> 0 %),
memory the largest sample."""
from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

WARMUP = 10
STEP_LINE = re.compile(r"^step (\d+)/\d+ \|.*\| ([0-9.]+) s$", re.M)


def step_rate(log: Path) -> float:
    times = [float(t) for step, t in STEP_LINE.findall(log.read_text()) if int(step) > WARMUP]
    if not times:
        raise SystemExit(f"{log}: no step lines after step {WARMUP} (its end: {log.read_text()[-300:]!r})")
    return 1.0 / statistics.median(times)


def gpu_samples(smi: Path) -> tuple[float, float]:
    rows = [line.split(", ") for line in smi.read_text().splitlines() if line.count(", ") == 2]
    busy = [float(u) for _, u, _ in rows if float(u) > 0]
    return (statistics.mean(busy) if busy else 0.0), max((float(m) for *_, m in rows), default=0.0)


def measured(out: Path) -> dict[Path, list[float]]:
    """Each nN folder's per-run rates, by N."""
    return {folder: [step_rate(log) for log in sorted(folder.glob("run_*.log"))]
            for folder in sorted(out.glob("n*"), key=lambda f: int(f.name[1:]))}


def main(out: Path, best: bool) -> None:
    runs = measured(out)
    if best:
        print(len(max(runs.values(), key=sum)))
        return
    rows, alone = [], None
    for folder, rates in runs.items():
        total = sum(rates)
        alone = alone if alone is not None else total / len(rates)
        utilisation, memory = gpu_samples(folder / "smi.csv")
        wall = float((folder / "wall_s").read_text())
        rows.append(f"| {len(rates)} | {statistics.mean(rates):.2f} | {total:.2f} | **{total / alone:.2f}x** | "
                    f"{utilisation:.0f}% | {memory / 1024:.1f} GiB | {wall:.0f} s |")
    print("| runs at once | steps/s per run | steps/s, all runs | against one alone | GPU busy (mean of nonzero "
          "samples) | GPU memory (max) | wall, start to last exit |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main(Path(sys.argv[1]), best="--best" in sys.argv[2:])
