"""`python -m rookworld.sweep timeline LAUNCH_DIR...`: trials per hour and idle GPU-slot time of sweep launches.

Each worker logs `ready`, each trial's `start` and `end`, and `done` with wall-clock times in
`<launch dir>/.sweep/worker_<k>.jsonl` (rookworld/sweep/running/worker.py); the launch's start time is in
`.sweep/launch.json`. The arithmetic is rookworld/stats/throughput.py's.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from rookworld.stats.throughput import LaunchTimeline, launch_timeline


def read_timeline(launch_dir: Path) -> LaunchTimeline:
    control = launch_dir / ".sweep"
    launch = json.loads((control / "launch.json").read_text())
    workers = [[json.loads(line) for line in path.read_text().splitlines()] for path in sorted(control.glob("worker_*.jsonl"))]
    timeline = launch_timeline(str(launch_dir), launch["start"], launch["workers"], workers)
    if timeline is None:
        raise SystemExit(f"rookworld: error: no finished trial in {launch_dir}")
    return timeline


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

