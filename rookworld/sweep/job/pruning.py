"""The job side of the Optuna bridge: report a metric to the job's own trial; the pruner may stop it.

conf/trial/optuna.yaml lists this hook in `trial.hooks`; it binds to trial `trial.number` of the sweep's study
and after each step reports the mean of `trial.metric`'s last `trial.window` values (every `trial.every`
steps) and asks the pruner; a pruned trial is told PRUNED here, in the job, and the trainer stops (outcome
`pruned`). With `trial/pruner=wilcoxon` each held-out problem's score is its own Optuna step
(`step * n_problems + index`), so trials pair problem by problem. A divergence-stopped run is not pruned: its
outcome goes to the trial's user attr `rookworld:outcome` (docs/sweeps.md, How a trial ends and Pruning).
"""

from __future__ import annotations

import logging
import warnings
from collections import deque
from typing import TYPE_CHECKING

import optuna
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from optuna.pruners import (BasePruner, HyperbandPruner, MedianPruner, NopPruner, PercentilePruner, ThresholdPruner,
                            WilcoxonPruner)
from optuna.study import StudyDirection
from optuna.storages import BaseStorage
from optuna.trial import TrialState

from rookworld.app.config import ConfigError, load_trial_report, require
from rookworld.specs.trial import TrialReport
from rookworld.sweep.storage.study import OUTCOME_ATTR, STEP_ATTR, open_storage, trial_id
from rookworld.sweep.storage.storage_url import TIMEOUT_KNOBS, DbTimeouts, default_timeouts, timeouts_of
from rookworld.tracking import hydra_base_dir

if TYPE_CHECKING:
    from rookworld.judge.evaluate import EvalResult

log = logging.getLogger(__name__)

PRUNERS: dict[str, type[BasePruner]] = {
    "none": NopPruner,
    "median": MedianPruner,
    "percentile": PercentilePruner,
    "hyperband": HyperbandPruner,
    "threshold": ThresholdPruner,
    "wilcoxon": WilcoxonPruner,
}


def build_pruner(pruner: DictConfig) -> BasePruner:
    """`trial.pruner`: `kind` (none | median | percentile | hyperband | threshold | wilcoxon) and its arguments."""
    options = OmegaConf.to_container(pruner, resolve=True)
    assert isinstance(options, dict)
    kind = options.pop("kind", None)
    require(kind in PRUNERS, "trial.pruner.kind", kind, f"expected one of {', '.join(PRUNERS)}")
    try:
        with warnings.catch_warnings():  # WilcoxonPruner is "experimental" in Optuna: one warning per trial otherwise
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return PRUNERS[kind](**options)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"trial.pruner={dict(pruner)!r}: {error} (an argument of another pruner? drop it with "
                          "~trial.pruner.KEY)") from error


def study_location(trial: TrialReport) -> tuple[str, str, DbTimeouts]:
    """(study name, storage URL, its timeouts): `trial.study` / `trial.storage`, else the sweeper's."""
    sweeper = HydraConfig.get().sweeper if HydraConfig.initialized() else OmegaConf.create()
    name = trial.study or sweeper.get("study_name")
    url = trial.storage or sweeper.get("storage")
    require(bool(name) and bool(url), "trial.study/trial.storage", (name, url),
             "no Optuna study: run inside an Optuna sweep (-m sweeps=NAME) or set both")
    timeouts = timeouts_of(sweeper) if all(sweeper.get(knob) is not None for knob in TIMEOUT_KNOBS) else default_timeouts()
    return str(name), str(url), timeouts


class OptunaPruningHook:
    """A trainer StepHook reporting to one Optuna trial (see the module docstring)."""

    def __init__(self, study: optuna.Study, storage: BaseStorage, trial_id: int, settings: TrialReport) -> None:
        self.study = study
        self.trial = optuna.trial.Trial(study, trial_id)
        self.settings = settings
        self._storage = storage
        self._trial_id = trial_id
        self._values: deque[float] = deque(maxlen=settings.window)

    @classmethod
    def from_config(cls, cfg: DictConfig) -> OptunaPruningHook:
        settings = load_trial_report(cfg.trial)
        name, url, timeouts = study_location(settings)
        storage = open_storage(url, hydra_base_dir(), timeouts)
        study = optuna.load_study(study_name=name, storage=storage, pruner=build_pruner(cfg.trial.pruner),
                                  sampler=optuna.samplers.RandomSampler())  # the job never samples
        penalty = OmegaConf.select(cfg, "objective.failure_penalty", default=None)
        if penalty is not None:
            check_failure_penalty(penalty, study.direction)
        hook = cls(study, storage, trial_id(storage, name, settings.number), settings)
        hook.check_running()
        log.info("reporting %s to Optuna trial %d of study %s (%s)", settings.metric, settings.number, name,
                 type(study.pruner).__name__)
        return hook

    def check_running(self) -> None:
        """A job whose sweep process died runs on (joblib workers outlive it); once a new sweep has
        failed its trial as stale and re-queued it, the job stops here, within a step."""
        state = self._storage.get_trial(self._trial_id).state
        if state != TrialState.RUNNING:
            raise RuntimeError(f"Optuna trial {self.settings.number} of study {self.study.study_name!r} is "
                               f"{state.name}, not RUNNING (failed as stale by a newer sweep?): stopping this job")

    @property
    def per_problem(self) -> bool:
        """The pruner pairs values by problem (WilcoxonPruner), not by training step."""
        return isinstance(self.study.pruner, WilcoxonPruner)

    def should_prune(self, step: int, metrics: dict[str, float], evaluation: EvalResult | None = None) -> bool:
        """`evaluation`: the held-out evaluation of this step, if one ran (the per-problem pruner needs it)."""
        self.check_running()
        if self.per_problem:
            if evaluation is None or not evaluation.problem_scores:
                return False
            n = len(evaluation.problem_scores)
            for index, value in enumerate(evaluation.problem_scores):
                self.trial.report(value, step * n + index)
            self.trial.set_user_attr(STEP_ATTR, step)  # the summary shows this, not the paired ids
        elif not self._report_metric(step, metrics):
            return False
        if not self.trial.should_prune():
            return False
        self.study.tell(self.trial, state=TrialState.PRUNED)
        log.info("Optuna trial %d pruned at step %d", self.settings.number, step)
        return True

    def _report_metric(self, step: int, metrics: dict[str, float]) -> bool:
        """Report the windowed mean of `trial.metric` when due; True when something was reported."""
        value = metrics.get(self.settings.metric)
        if value is None:
            return False
        self._values.append(float(value))
        if step % self.settings.every:
            return False
        self.trial.report(sum(self._values) / len(self._values), step)
        return True

    def record_outcome(self, outcome: str, reason: str) -> None:
        """The run's outcome on its trial (user attr), unless the pruner already ended the trial."""
        if self._storage.get_trial(self._trial_id).state == TrialState.RUNNING:
            self.trial.set_user_attr(OUTCOME_ATTR, outcome)


def check_failure_penalty(penalty: float, direction: StudyDirection) -> None:
    """A failed run must rank below every real objective (a score in [0, 1]) in the study's direction."""
    if direction == StudyDirection.MINIMIZE:
        require(penalty > 1, "objective.failure_penalty", penalty,
                "a minimize study needs a penalty above every score (> 1), e.g. objective.failure_penalty=2")
    else:
        require(penalty < 0, "objective.failure_penalty", penalty,
                "a maximize study needs a penalty below every score (< 0), e.g. objective.failure_penalty=-1")
