"""The `trial.*` knobs the pruning hook of a sweep's job reads (rookworld/sweep/job/pruning.py): which Optuna
trial it reports to, in which study, and what it reports."""
from __future__ import annotations

from dataclasses import dataclass

from rookworld.specs.rules import require

REPORT_KEYS = ("number", "metric", "every", "window", "study", "storage")  # the keys of the trial node it reads


@dataclass(frozen=True)
class TrialReport:
    number: int | None  # this job's trial; rookworld's sweeper sets it (trial.number=N)
    metric: str  # the step metric reported
    every: int  # report at steps divisible by this
    window: int  # report the mean of the metric's last N values
    study: str | None  # None: hydra.sweeper.study_name
    storage: str | None  # None: hydra.sweeper.storage

    def __post_init__(self) -> None:
        require(self.number is not None and self.number >= 0, "trial.number", self.number,
                "must be a trial number >= 0")
        require(bool(self.metric), "trial.metric", self.metric, "must name a step metric")
        require(self.every >= 1, "trial.every", self.every, "must be an integer >= 1")
        require(self.window >= 1, "trial.window", self.window, "must be an integer >= 1")
