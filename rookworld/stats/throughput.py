"""Trials per hour and idle slot time of one sweep launch, from its workers' event times (`python -m
rookworld.sweep timeline` reads them):

- trials/h: finished trials / (last trial's end - launch start);
- idle: the share of slot time (worker slots x that wall time) in which a slot ran no trial: worker
  start-up, asking and telling between trials, and the tail when no trial is left to start;
- steady idle: the same between each worker's first trial start and its last trial end (the time
  between trials only).

And, from the trials of a study alone (whatever launches ran them), the slot occupancy of its GPUs: trials running
at once on each GPU over the time it ran any, and those busy GPU-seconds.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


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


def launch_timeline(launch_dir: str, start: float, slots: int, workers: list[list[dict]]) -> LaunchTimeline | None:
    """`workers`: each worker's events ({"event": "start" | "end", "trial": N, "t": seconds}; others ignored);
    `slots`: worker slots (a worker that died and its replacement share one). None: no trial finished."""
    spans = []  # per worker: (first start, last end, busy seconds, trials)
    for events in workers:
        starts = {e["trial"]: e["t"] for e in events if e["event"] == "start"}
        ends = [(e["trial"], e["t"]) for e in events if e["event"] == "end"]
        if ends:
            busy = sum(t - starts[n] for n, t in ends)
            spans.append((min(starts.values()), max(t for _, t in ends), busy, len(ends)))
    if not spans:
        return None
    wall, busy, trials = max(s[1] for s in spans) - start, sum(s[2] for s in spans), sum(s[3] for s in spans)
    steady = sum(s[1] - s[0] for s in spans)
    return LaunchTimeline(launch_dir, slots, trials, round(wall, 1), round(trials / wall * 3600, 1),
                          round(1 - busy / (slots * wall), 4), round(1 - busy / steady, 4),
                          round(sum(s[0] - start for s in spans) / len(spans), 1))


@dataclass(frozen=True)
class SlotOccupancy:
    gpus: int
    busy_s: float      # GPU-seconds in which a GPU ran at least one trial, summed over the GPUs
    mean: float        # trials running at once on a GPU, averaged over its busy seconds
    max: int           # the most trials at once on one GPU


def slot_occupancy(spans: Mapping[str, Sequence[tuple[float, float]]]) -> SlotOccupancy | None:
    """`spans`: each GPU's trials as (start, end) seconds. None: no trial. A GPU's time with no trial running (between
    trials, between jobs) is not busy and does not lower the mean."""
    busy = trial_seconds = 0.0
    most = 0
    for trials in spans.values():
        edges = sorted([(start, 1) for start, _ in trials] + [(end, -1) for _, end in trials])  # an end before a start
        running, since = 0, 0.0
        for t, change in edges:
            if running:
                busy += t - since
            running, since = running + change, t
            most = max(most, running)
        trial_seconds += sum(end - start for start, end in trials)
    if not busy:
        return None
    return SlotOccupancy(len(spans), round(busy, 1), round(trial_seconds / busy, 2), most)
