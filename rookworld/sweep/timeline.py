"""`python -m rookworld.sweep timeline LAUNCH_DIR...`: trials per hour and idle GPU-slot time of sweep launches.

Each worker logs `ready`, each trial's `start` and `end`, and `done` with wall-clock times in
`<launch dir>/.sweep/worker_<k>.jsonl` (rookworld/sweep/running/worker.py); the launch's start time is in
`.sweep/launch.json`. For each launch:

- trials/h: finished trials / (last trial's end - launch start);
- idle: the share of slot time (worker slots x that wall time) in which a slot ran no trial: worker
  start-up, asking and telling between trials, and the tail when no trial is left to start;
- steady idle: the same between each worker's first trial start and its last trial end (the time
  between trials only).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class LaunchTimeline:
    launch_dir: str
    workers: int
    trials: int
    wall_s: float
    trials_per_hour: float
    idle: float
    steady_idle: float
    startup_s: float  # mean time from the launch's start to a worker's first trial


def read_timeline(launch_dir: Path) -> LaunchTimeline:
    control = launch_dir / ".sweep"
    launch = json.loads((control / "launch.json").read_text())
    start, slots = launch["start"], launch["workers"]  # slots: a worker that died and its replacement share one
    workers = [[json.loads(line) for line in path.read_text().splitlines()] for path in sorted(control.glob("worker_*.jsonl"))]
    spans = []  # per worker: (first start, last end, busy seconds, trials)
    for events in workers:
        starts = {e["trial"]: e["t"] for e in events if e["event"] == "start"}
        ends = [(e["trial"], e["t"]) for e in events if e["event"] == "end"]
        busy = sum(t - starts[n] for n, t in ends)
        if ends:
            spans.append((min(starts.values()), max(t for _, t in ends), busy, len(ends)))
    if not spans:
        raise SystemExit(f"rookworld: error: no finished trial in {launch_dir}")
    end = max(s[1] for s in spans)
    wall, busy, trials = end - start, sum(s[2] for s in spans), sum(s[3] for s in spans)
    steady = sum(s[1] - s[0] for s in spans)
    return LaunchTimeline(str(launch_dir), slots, trials, round(wall, 1), round(trials / wall * 3600, 1),
                          round(1 - busy / (slots * wall), 4), round(1 - busy / steady, 4),
                          round(sum(s[0] - start for s in spans) / len(spans), 1))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("launch_dirs", nargs="+", type=Path, help="sweep launch folders (hydra.sweep.dir)")
    parser.add_argument("--json", action="store_true", help="print JSON lines instead of a table")


def run(args: argparse.Namespace) -> int:
    rows = [read_timeline(d) for d in args.launch_dirs]
    if args.json:
        print("\n".join(json.dumps(asdict(r)) for r in rows))
        return 0
    print("| launch | workers | trials | wall s | trials/h | slot idle | steady idle | start-up s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {Path(r.launch_dir).name} | {r.workers} | {r.trials} | {r.wall_s} | {r.trials_per_hour:.0f} | "
              f"{100 * r.idle:.1f}% | {100 * r.steady_idle:.1f}% | {r.startup_s} |")
    return 0

