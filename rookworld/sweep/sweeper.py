"""rookworld's Optuna sweeper: hydra-optuna-sweeper's OptunaSweeper, its loop unchanged, plus the trial bridge.

`hydra/sweeper: rookworld_optuna` (conf/hydra/sweeper/rookworld_optuna.yaml) selects it, as every
sweeps/*.yaml does; Hydra finds the class through the `hydra.plugins` entry point in pyproject.toml.
This module is imported at every Hydra start, so Optuna is imported only when a sweep runs.
On top of the stock sweeper (docs/sweeps.md):

1. Trial number: every trial gets its own number as the param `trial.number` (a custom-search-space
   step that always runs, before a configured `custom_search_space`), so its job can bind to it and
   report to the pruner (rookworld/sweep/pruning.py).
2. Tell skips finished trials: the stock loop tells every trial COMPLETE (or FAIL) when its job
   returns, but a job the pruner stopped has already ended its trial PRUNED, and telling it again
   raises "Cannot tell a PRUNED trial". While the stock loop runs, its module's `optuna` name is a
   proxy whose `create_study` returns a study whose `tell` has `skip_if_finished=True`.
3. Storage: `journal:PATH` selects Optuna's JournalStorage; relative sqlite / journal paths are
   relative to the launch directory (rookworld/sweep/study.py).
4. Resume: re-running the same command loads the study (load_if_exists). `n_trials` counts the
   trials the study has run to their end (COMPLETE, PRUNED, FAIL by the job), so a re-run runs only
   the rest; the sampler seed is offset by the number of trials already in the study, so a resumed
   study does not repeat its start-up parameters.
5. Stale trials: RUNNING trials whose sweeper died (a kill) are failed and re-queued with the same
   params, `stale_retries` times at most; their MLflow runs, left `running`, are ended `failed`.
6. Failed jobs: the exception, in one line, becomes the trial's user attr `fail_reason`.
7. Summary: at the end the whole study (Optuna states, MLflow outcomes, best trial) is printed and
   logged on the sweep's MLflow parent run (rookworld/sweep/summary.py).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from hydra.core.utils import JobReturn, JobStatus
from hydra.types import HydraContext, TaskFunction
from hydra.utils import instantiate
from hydra_plugins.hydra_optuna_sweeper.optuna_sweeper import OptunaSweeper
from omegaconf import DictConfig, ListConfig, OmegaConf

from rookworld.sweep.mlflow_parent import tracking_enabled
from rookworld.sweep.summary import normalise_direction
from rookworld.tracking import (
    OUTCOME_TAG,
    STOP_REASON_TAG,
    STUDY_TAG,
    TRIAL_TAG,
    TrackingSettings,
    absolute_path,
    find_experiment,
    hydra_base_dir,
    one_line,
)
from rookworld.outcomes import FAILED, RUNNING
from rookworld.sweep.context import read_parent_ref

if TYPE_CHECKING:
    import optuna
    from mlflow import MlflowClient

    from rookworld.sweep.study import Heartbeat, StaleTrial

log = logging.getLogger(__name__)
SAMPLER_TARGETS = ("hydra_plugins.hydra_optuna_sweeper.*", "optuna.samplers.*")


@dataclass(frozen=True)
class SweepSettings:
    """What this sweeper adds to the stock config, validated at the boundary."""

    study_name: str
    direction: str
    n_trials: int
    stale_retries: int
    heartbeat_interval_s: float
    grace_period_s: float

    def __post_init__(self) -> None:
        checks = [
            (bool(self.study_name), "hydra.sweeper.study_name", "must name the study (one per sweep)"),
            (self.n_trials >= 0, "hydra.sweeper.n_trials", "must be >= 0"),
            (self.stale_retries >= 0, "hydra.sweeper.stale_retries", "must be >= 0"),
            (self.heartbeat_interval_s > 0, "hydra.sweeper.heartbeat_interval_s", "must be > 0"),
            (self.grace_period_s >= 2 * self.heartbeat_interval_s, "hydra.sweeper.grace_period_s",
             f"must be >= 2 x heartbeat_interval_s = {2 * self.heartbeat_interval_s:g}"),
        ]
        for ok, key, rule in checks:
            if not ok:
                config_error(key, getattr(self, key.rsplit(".", 1)[1]), rule)


def config_error(key: str, value: Any, rule: str) -> None:
    """Raise rookworld.config's one-line ConfigError "key=value: rule"."""
    from rookworld.config import require  # imports torch: only when there is an error to raise

    require(False, key, value, rule)


class RookworldOptunaSweeper(OptunaSweeper):
    """The stock Optuna sweeper plus the trial bridge (see the module docstring)."""

    def __init__(
        self,
        sampler: DictConfig,
        direction: Any,
        storage: str,
        study_name: str,
        n_trials: int,
        n_jobs: int,
        max_failure_rate: float,
        custom_search_space: str | None,
        params: DictConfig | None,
        stale_retries: int,
        heartbeat_interval_s: float,
        grace_period_s: float,
    ) -> None:
        from rookworld.sweep.study import STORAGE_ERRORS, open_storage

        if not isinstance(storage, str) or not storage:
            config_error("hydra.sweeper.storage", storage, "expected a storage URL (sweep_storage=...)")
        if isinstance(direction, (list, ListConfig)) and len(direction) != 1:
            config_error("hydra.sweeper.direction", direction, "one direction: the objective is one float")
        self.settings = SweepSettings(str(study_name or ""), normalise_direction(direction), int(n_trials),
                                      int(stale_retries), float(heartbeat_interval_s), float(grace_period_s))
        try:
            self.storage = open_storage(storage, hydra_base_dir())
        except STORAGE_ERRORS as error:
            config_error("hydra.sweeper.storage", storage, f"cannot open the Optuna storage ({one_line(error)})")
        self._storage_url = storage
        super().__init__(sampler, self.settings.direction, self.storage, study_name, n_trials, n_jobs,
                         max_failure_rate, custom_search_space, params)
        self._sampler_config = sampler
        self._user_extender = self.sweeper.custom_search_space_extender
        self.sweeper.custom_search_space_extender = self._configure_trial
        self._heartbeat: Heartbeat | None = None
        self._config: DictConfig | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        self._config = config
        self.sweeper.launcher = FailureRecordingLauncher(self.sweeper.launcher, self._record_failure)

    def sweep(self, arguments: list[str]) -> None:
        import optuna

        from rookworld.sweep.study import Heartbeat, resolve_stale_trials

        study = optuna.create_study(study_name=self.settings.study_name, storage=self.storage,
                                    direction=self.settings.direction, load_if_exists=True)
        log.info("Optuna study %s in %s", study.study_name, self._storage_url)
        stale = resolve_stale_trials(study, self.storage, self.settings.grace_period_s,
                                     self.settings.stale_retries)
        self._end_stale_mlflow_runs(stale)
        self._plan(study)
        self._heartbeat = Heartbeat(self.storage, self.settings.heartbeat_interval_s)
        with self._heartbeat, _stock_loop_tells_skip_finished():
            self.sweeper.sweep(arguments)
        self._summarise(study)

    # ---------------------------------------------------------------- per trial

    def _configure_trial(self, config: DictConfig, trial: optuna.trial.Trial) -> None:
        from rookworld.sweep.study import add_trial_number, trial_id

        add_trial_number(trial)
        assert self._heartbeat is not None, "trials are configured only inside sweep()"
        self._heartbeat.own(trial_id(self.storage, self.settings.study_name, trial.number))
        if self._user_extender is not None:
            self._user_extender(config, trial)

    def _record_failure(self, overrides: Sequence[str], error: BaseException) -> None:
        from rookworld.sweep.study import FAIL_REASON_ATTR, trial_id, trial_number_of

        number = trial_number_of(overrides)
        bound = trial_id(self.storage, self.settings.study_name, number)
        if self.storage.get_trial(bound).state.is_finished():  # pruned by its job, which raised afterwards
            log.warning("trial %d, already finished, then raised %s", number, one_line(error))
            return
        self.storage.set_trial_user_attr(bound, FAIL_REASON_ATTR, one_line(error))

    # ---------------------------------------------------------------- resume

    def _plan(self, study: optuna.Study) -> None:
        """Run only the trials the study still lacks; seed the sampler past the trials it has."""
        from rookworld.sweep.study import finished_count

        done, existing = finished_count(study), len(study.trials)
        self.sweeper.n_trials = max(0, self.settings.n_trials - done)
        self.sweeper.sampler = self._make_sampler(seed_offset=existing)
        if existing:
            log.info("study %s resumed: %d trials in it, %d run to their end; %d to go to n_trials=%d",
                     self.settings.study_name, existing, done, self.sweeper.n_trials, self.settings.n_trials)

    def _make_sampler(self, seed_offset: int) -> Any:
        config = OmegaConf.create(OmegaConf.to_container(self._sampler_config, resolve=True))
        if config.get("seed") is not None:
            config.seed = int(config.seed) + seed_offset
        return instantiate(config, _execution_whitelist_=SAMPLER_TARGETS)

    # ---------------------------------------------------------------- MLflow

    def _mlflow(self) -> tuple[MlflowClient, str] | None:
        """The tracking client and experiment id of this sweep's runs, or None (tracking off / no runs yet)."""
        assert self._config is not None
        if not tracking_enabled(self._config):
            return None
        return find_experiment(TrackingSettings.from_config(self._config.tracking, hydra_base_dir()))

    def _end_stale_mlflow_runs(self, stale: list[StaleTrial]) -> None:
        """A killed job leaves its MLflow run RUNNING with outcome `running`: end it `failed` (KILLED)."""
        tracking = self._mlflow() if stale else None
        if tracking is None:
            return
        client, experiment_id = tracking
        for trial in stale:
            query = (f"tags.`{STUDY_TAG}` = '{self.settings.study_name}' and tags.`{TRIAL_TAG}` = '{trial.number}'"
                     f" and tags.`{OUTCOME_TAG}` = '{RUNNING}'")
            for run in client.search_runs([experiment_id], query):
                reason = f"sweep stopped while it ran: Optuna trial {trial.number} {trial.reason}"
                client.set_tag(run.info.run_id, OUTCOME_TAG, FAILED)
                client.set_tag(run.info.run_id, STOP_REASON_TAG, reason + (" (re-queued)" if trial.retried else ""))
                client.set_terminated(run.info.run_id, status="KILLED")

    def _summarise(self, study: optuna.Study) -> None:
        from rookworld.sweep.summary import fetch_study_runs, log_study_summary, study_markdown, summarise_study

        tracking = self._mlflow()
        runs = fetch_study_runs(tracking[0], tracking[1], study.study_name) if tracking else None
        summary = summarise_study(study, runs)
        print(study_markdown(summary), flush=True)
        assert self._config is not None
        parent = read_parent_ref(absolute_path(str(self._config.hydra.sweep.dir), hydra_base_dir()))
        if tracking is not None and parent is not None:
            log_study_summary(tracking[0], parent.run_id, summary)


class FailureRecordingLauncher:
    """Wraps the sweep's launcher: a failed job's exception is recorded before the stock loop tells FAIL."""

    def __init__(self, launcher: Any, record: Callable[[Sequence[str], BaseException], None]) -> None:
        self.launcher = launcher
        self._record = record

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        returns = self.launcher.launch(job_overrides, initial_job_idx=initial_job_idx)
        for overrides, job in zip(job_overrides, returns, strict=True):
            if job.status == JobStatus.FAILED:
                self._record(overrides, _job_error(job))
        return returns


def _job_error(job: JobReturn) -> BaseException:
    try:
        _ = job.return_value  # raises the job's exception; the stock loop reads it again and tells FAIL
    except BaseException as error:  # noqa: BLE001 - inspected, not handled
        return error
    raise AssertionError("a FAILED job returned a value")


class _OptunaForStockLoop(types.ModuleType):
    """`optuna` as the stock sweeper's loop sees it: its studies' `tell` skips finished trials."""

    def __getattr__(self, name: str) -> Any:
        import optuna

        return getattr(optuna, name)

    @staticmethod
    def create_study(**kwargs: Any) -> optuna.Study:
        import optuna

        study = optuna.create_study(**kwargs)
        study.tell = functools.partial(study.tell, skip_if_finished=True)  # type: ignore[method-assign]
        return study


@contextlib.contextmanager
def _stock_loop_tells_skip_finished() -> Iterator[None]:
    from hydra_plugins.hydra_optuna_sweeper import _impl

    original = _impl.optuna
    _impl.optuna = _OptunaForStockLoop("optuna")
    try:
        yield
    finally:
        _impl.optuna = original
