"""Divergence detectors: after every step, stop a run whose own training signals say it is diverging.

Each detector watches one per-step metric against a rule of `conf/guards/` (and `kl.max` from
`conf/kl/`); the first that fires ends the run with an outcome naming it. A tripped detector is a
recorded result (the run gets `objective.failure_penalty`), never something to tune away:

  nan_failure         `guards.max_nonfinite_steps` non-finite steps in a row: a skipped update
                      (non-finite loss or gradient norm), an update that left a weight non-finite,
                      non-finite logits met by the sampler, or a non-finite kl, entropy or reward
  kl_failure          kl above `kl.max` for `kl.max_steps_above` steps in a row (a non-finite kl
                      is nan_failure's: it leaves this count as it is)
  diverged:kl_growth  the mean kl of the last `window` steps is at least `factor` x the mean of
                      the `window` steps before (0 before the run's first steps: the policy starts
                      as the reference) and above `min_fraction` x kl.max, while kl is still at or
                      below kl.max: a run racing toward kl.max, stopped before it gets there
  diverged:entropy    the mean token entropy of the last `window` steps is below `min_ratio` x the
                      mean of the run's first `window` steps (the policy collapsing onto one answer)
  diverged:grad_norm  the gradient norm is above `factor` x the median of the previous `window`
                      non-zero norms for `steps_above` steps in a row (armed once `window` are in)
  diverged:reward     the mean reward of the last `window` steps is `drop` below the mean of the
                      run's first `window` steps

A window of 0 switches its detector off. Only finite values enter a detector's history. Pure
Python (no torch): the trainer calls `Detectors.check(metrics, nonfinite)` once per step and saves
`Detectors.state_dict()` with its checkpoints.
"""
from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Mapping

from rookworld.outcomes import (DIVERGED_ENTROPY, DIVERGED_GRAD_NORM, DIVERGED_KL_GROWTH, DIVERGED_REWARD,
                                KL_FAILURE, NAN_FAILURE)

WATCHED_METRICS = ("kl", "entropy", "reward")  # a non-finite value of any of these makes the step non-finite

Stop = tuple[str, str]  # (outcome, reason)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


@dataclass
class NonFinite:
    """nan_failure: `max_steps` non-finite steps in a row."""
    max_steps: int
    in_row: int = 0
    total: int = 0

    def observe(self, nonfinite: bool) -> Stop | None:
        self.in_row = self.in_row + 1 if nonfinite else 0
        self.total += int(nonfinite)
        if self.in_row >= self.max_steps:
            return NAN_FAILURE, f"{self.in_row} non-finite steps in a row"
        return None


@dataclass
class KLCeiling:
    """kl_failure: kl above `kl_max` for `steps_above` steps in a row (a non-finite kl is not counted
    either way: the non-finite guard decides those steps)."""
    kl_max: float
    steps_above: int
    in_row: int = 0

    def observe(self, kl: float | None) -> Stop | None:
        if not _finite(kl):
            return None
        self.in_row = self.in_row + 1 if kl > self.kl_max else 0
        if self.in_row >= self.steps_above:
            return KL_FAILURE, f"kl={kl:.4g} > kl.max={self.kl_max} for {self.in_row} step(s)"
        return None


@dataclass
class KLGrowthDetector:
    """diverged:kl_growth: kl rising by `factor` from one window to the next, above `min_fraction` x kl.max."""
    kl_max: float
    window: int
    factor: float
    min_fraction: float
    history: deque = field(default_factory=deque)

    def __post_init__(self):
        self.history = deque(self.history, maxlen=2 * self.window)

    def observe(self, kl: float | None) -> Stop | None:
        if not _finite(kl):
            return None
        self.history.append(kl)
        values = list(self.history)
        recent, before = values[-self.window:], values[:-self.window]  # a short first window: the run's start
        recent_mean = _mean(recent)
        before_mean = _mean(before) if before else 0.0  # the run starts at kl = 0 (policy = reference)
        floor = self.min_fraction * self.kl_max
        if kl > self.kl_max:  # already above the ceiling: kl_failure's rule (kl.max_steps_above) decides
            return None
        if recent_mean >= floor and recent_mean >= self.factor * before_mean:
            earlier = (f"{self.factor:g} x {before_mean:.4g}, the mean of the {len(before)} steps before" if before
                       else "the kl of 0 the run starts at")  # a first window: the run's first steps
            return DIVERGED_KL_GROWTH, (f"mean kl of the last {len(recent)} steps {recent_mean:.4g} >= {earlier}, "
                                        f"and >= {floor:.4g} ({self.min_fraction:g} x kl.max={self.kl_max:g})")
        return None


@dataclass
class BelowStart:
    """A recent window mean fallen below the run's own start (the mean of its first `window` values):
    below `ratio` x start when `ratio` is set, or below start - `drop`."""
    outcome: str
    metric: str
    window: int
    ratio: float | None = None
    drop: float | None = None
    start: list = field(default_factory=list)
    recent: deque = field(default_factory=deque)

    def __post_init__(self):
        self.recent = deque(self.recent, maxlen=self.window)

    def observe(self, value: float | None) -> Stop | None:
        if not _finite(value):
            return None
        if len(self.start) < self.window:
            self.start.append(value)
        self.recent.append(value)
        if len(self.start) < self.window:
            return None
        start, recent = _mean(self.start), _mean(self.recent)
        if self.ratio is not None and recent < self.ratio * start:
            return self.outcome, (f"mean {self.metric} of the last {self.window} steps {recent:.4g} < "
                                  f"{self.ratio:g} x {start:.4g} at the start")
        if self.drop is not None and recent < start - self.drop:
            return self.outcome, (f"mean {self.metric} of the last {self.window} steps {recent:.4g} < "
                                  f"{start:.4g} at the start - {self.drop:g}")
        return None


@dataclass
class GradNormDetector:
    """diverged:grad_norm: the norm above `factor` x the running median for `steps_above` steps in a row."""
    window: int
    factor: float
    steps_above: int
    history: deque = field(default_factory=deque)
    in_row: int = 0

    def __post_init__(self):
        self.history = deque(self.history, maxlen=self.window)

    def observe(self, norm: float | None) -> Stop | None:
        if not _finite(norm) or norm == 0.0:  # 0: no group had a signal this step, nothing to compare
            return None
        armed = len(self.history) == self.window
        median = statistics.median(self.history) if armed else 0.0
        self.history.append(norm)
        self.in_row = self.in_row + 1 if armed and norm > self.factor * median else 0
        if self.in_row >= self.steps_above:
            return DIVERGED_GRAD_NORM, (f"grad_norm={norm:.4g} > {self.factor:g} x running median {median:.4g} "
                                        f"for {self.in_row} step(s)")
        return None


class Detectors:
    """Every detector of `conf/guards/` plus the KL ceiling; `check` once per step, first firing wins."""

    def __init__(self, guards, kl_max: float | None, kl_max_steps: int):
        """`guards`: the `guards` config node (or any mapping with its keys); `kl_max`: None when KL is off."""
        self.nonfinite = NonFinite(guards["max_nonfinite_steps"])
        self.detectors: dict[str, object] = {}  # metric -> detector, in the order they are asked
        if kl_max is not None:
            self.detectors["kl"] = KLCeiling(kl_max, kl_max_steps)
            g = guards["kl_growth"]
            if g["window"]:
                self.detectors["kl_growth"] = KLGrowthDetector(kl_max, g["window"], g["factor"], g["min_fraction"])
        e, n, r = guards["entropy"], guards["grad_norm"], guards["reward"]
        if e["window"]:
            self.detectors["entropy"] = BelowStart(DIVERGED_ENTROPY, "entropy", e["window"], ratio=e["min_ratio"])
        if n["window"]:
            self.detectors["grad_norm"] = GradNormDetector(n["window"], n["factor"], n["steps_above"])
        if r["window"]:
            self.detectors["reward"] = BelowStart(DIVERGED_REWARD, "reward", r["window"], drop=r["drop"])

    def check(self, metrics: Mapping[str, float], nonfinite_update: bool) -> Stop | None:
        """Feed one step's metrics to every detector; the first stop, or None. A step is non-finite
        when its update was skipped or a watched metric is not finite."""
        nonfinite = nonfinite_update or any(k in metrics and not math.isfinite(metrics[k]) for k in WATCHED_METRICS)
        stops = [self.nonfinite.observe(nonfinite)]
        for name, detector in self.detectors.items():
            stops.append(detector.observe(metrics.get("kl" if name == "kl_growth" else name)))
        return next((stop for stop in stops if stop is not None), None)

    def state_dict(self) -> dict:
        state = {"nonfinite_in_row": self.nonfinite.in_row, "nonfinite_total": self.nonfinite.total}
        for name, detector in self.detectors.items():
            state[name] = {k: list(v) if isinstance(v, deque) else v for k, v in vars(detector).items()
                           if k in ("history", "start", "recent", "in_row")}
        return state

    def load_state_dict(self, state: dict) -> None:
        self.nonfinite.in_row = state["nonfinite_in_row"]
        self.nonfinite.total = state["nonfinite_total"]
        for name, detector in self.detectors.items():
            for key, value in state.get(name, {}).items():
                current = getattr(detector, key)
                setattr(detector, key, deque(value, maxlen=current.maxlen) if isinstance(current, deque) else value)
