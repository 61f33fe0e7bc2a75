"""Experiment tracking: a `Tracker` with an MLflow backend and a no-op backend.

    tracker = make_tracker(cfg)          # reads cfg.tracking (backend: mlflow | none)
    with tracker:                        # starts the run; the outcome tag is final on exit
        tracker.log_params(cfg)
        tracker.log_metrics({"reward": 0.3}, step=3)
        tracker.set_outcome("success")

The `none` backend never imports mlflow. The MLflow backend imports it lazily, on `__enter__`.
Metrics are buffered on the calling thread (microseconds per call) and shipped every
`tracking.flush_interval_s` seconds, and at close, to a writer subprocess that logs them in
batches (`MlflowClient.log_batch`), so MLflow's per-metric CPU cost never holds the trainer's GIL;
a write error is re-raised on the calling thread at the next `log_metrics` or at close.

Run outcome (tag `rookworld.outcome`): "running" from the start, then one of OUTCOMES. On exit:
an exception in the body gives "failed" with `rookworld.stop_reason` = "ExcType: message" (the
exception propagates), or "stopped by SIGTERM" / "stopped by SIGINT" for a signal
(rookworld.interrupts); a clean exit with no outcome set gives "success". MLflow run status:
success -> FINISHED; kl_failure, nan_failure, diverged:*, failed -> FAILED; pruned -> KILLED; an interrupt
(a signal, KeyboardInterrupt, SystemExit) -> KILLED.

A caller that places the run (a multirun job: the config's tracking.run_link, rookworld/app/hooks.py) passes a RunLink:
the parent run it is a child of (tag `mlflow.parentRunId`), a default run name and extra tags.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from rookworld.interrupts import Interrupted
from rookworld.outcomes import FAILED, FAILURE_OUTCOMES, OUTCOMES, PRUNED, RUNNING, SUCCESS
from rookworld.tracking.params import (MAX_PARAMS_TAGS_PER_BATCH, flatten_config, git_state, one_line,
                                       sanitize_key, table_columns, truncate_params)
from rookworld.tracking.settings import TrackingSettings, hydra_base_dir
from rookworld.tracking.store import get_or_create_experiment, open_store
from rookworld.tracking.writer import FlushStats, MetricWriter, start_writer_process, stop_unused_writer

if TYPE_CHECKING:
    from mlflow import MlflowClient

log = logging.getLogger(__name__)

OUTCOME_TAG = "rookworld.outcome"
STOP_REASON_TAG = "rookworld.stop_reason"
CHANGE_TAG = "rookworld.change"  # improved / worse / no_change: eval/score from step 0 to the end (rookworld.judge.evaluate)
CHANGE_METRIC, CHANGE_SE_METRIC = "change/eval_score", "change/stderr"  # the change and its paired standard error
STEPS_METRIC = "run/steps"  # the steps a run trained, logged at its end beside `objective`
TRIAL_TAG = "rookworld.trial"
STUDY_TAG = "rookworld.study"
OVERRIDES_TAG = "rookworld.overrides"
ROLE_TAG = "rookworld.role"
PARENT_TAG = "mlflow.parentRunId"

RUN_STATUS = {
    RUNNING: "FINISHED",
    SUCCESS: "FINISHED",
    **dict.fromkeys(FAILURE_OUTCOMES, "FAILED"),
    PRUNED: "KILLED",
    FAILED: "FAILED",
}


@dataclass(frozen=True)
class RunLink:
    """Where the caller places the run: its parent run (None: a top-level run), a run name used
    when tracking.run_name is unset, and tags set at the start."""

    parent_run_id: str | None = None
    parent_experiment_id: str | None = None
    parent_tracking_uri: str | None = None
    run_name: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


class Tracker:
    """Common run-outcome logic; backends implement `_start`, `_write_outcome` and `_finish`."""

    def __init__(self) -> None:
        self.outcome = RUNNING
        self.stop_reason = ""

    @property
    def run_id(self) -> str | None:
        return None

    def __enter__(self) -> Tracker:
        self._start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.outcome = FAILED
            self.stop_reason = exc.stop_reason if isinstance(exc, Interrupted) else one_line(exc)
        elif self.outcome == RUNNING:
            self.outcome = SUCCESS
        interrupted = isinstance(exc, (KeyboardInterrupt, SystemExit))
        status = "KILLED" if interrupted else RUN_STATUS[self.outcome]
        try:
            self._finish(status)
        except Exception as finish_error:
            if exc is None:
                raise
            log.exception("closing the tracking run failed after the run raised")
            exc.add_note(f"closing the tracking run also failed: {one_line(finish_error)}")

    def set_outcome(self, outcome: str, reason: str = "") -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        self.outcome, self.stop_reason = outcome, " ".join(str(reason).split())
        self._write_outcome()

    def _start(self) -> None:
        raise NotImplementedError

    def _write_outcome(self) -> None:
        raise NotImplementedError

    def _finish(self, status: str) -> None:
        raise NotImplementedError

    def log_params(self, cfg: DictConfig) -> None:
        raise NotImplementedError

    def set_tag(self, key: str, value: str) -> None:
        raise NotImplementedError

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        raise NotImplementedError

    def log_samples(self, rows: Sequence[Mapping[str, Any]], step: int) -> None:
        raise NotImplementedError

    def log_dict(self, obj: Mapping[str, Any], artifact_file: str) -> None:
        raise NotImplementedError

    def log_config_yaml(self, cfg: DictConfig) -> None:
        raise NotImplementedError

    def log_artifacts(self, local_dir: str | Path, artifact_path: str | None = None) -> None:
        raise NotImplementedError


class NullTracker(Tracker):
    """tracking=none: logs nothing, imports nothing; outcomes are still validated."""

    def _start(self) -> None:
        log.debug("tracking disabled (tracking.backend=none)")

    def _write_outcome(self) -> None:
        pass

    def _finish(self, status: str) -> None:
        pass

    def log_params(self, cfg: DictConfig) -> None:
        pass

    def set_tag(self, key: str, value: str) -> None:
        pass

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        pass

    def log_samples(self, rows: Sequence[Mapping[str, Any]], step: int) -> None:
        pass

    def log_dict(self, obj: Mapping[str, Any], artifact_file: str) -> None:
        pass

    def log_config_yaml(self, cfg: DictConfig) -> None:
        pass

    def log_artifacts(self, local_dir: str | Path, artifact_path: str | None = None) -> None:
        pass


class MlflowTracker(Tracker):
    """One MLflow run; a child of `link`'s parent run when it names one."""

    def __init__(self, settings: TrackingSettings, link: RunLink | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.link = link or RunLink()
        self._client: MlflowClient | None = None
        self._run_id: str | None = None
        self._writer: MetricWriter | None = None
        self._keys: dict[str, str] = {}

    @property
    def run_id(self) -> str | None:
        return self._run_id

    @property
    def flush_stats(self) -> FlushStats:
        """The metric writer's work (complete once the run has ended)."""
        assert self._writer is not None, "flush_stats is available once the run started"
        return self._writer.stats

    def _start(self) -> None:
        process = start_writer_process()
        try:
            client, run_id, experiment_id = self._create_run()
        except BaseException:
            stop_unused_writer(process)
            raise
        self._client, self._run_id = client, run_id
        self._writer = MetricWriter(process, self.settings.uri, run_id, self.settings.flush_interval_s)
        log.info("MLflow run %s (experiment %s) at %s", run_id, experiment_id, self.settings.uri)

    def _create_run(self) -> tuple[MlflowClient, str, str]:
        client = open_store(self.settings)
        parent = self._parent()
        if parent is not None:
            experiment_id = parent.parent_experiment_id
        else:
            experiment_id = get_or_create_experiment(client, self.settings)
        run = client.create_run(experiment_id, run_name=self._run_name(), tags=self._start_tags(parent))
        return client, run.info.run_id, experiment_id

    def _parent(self) -> RunLink | None:
        """The link when it names a parent in this run's store, else None."""
        link = self.link
        if link.parent_run_id is None:
            return None
        if link.parent_tracking_uri != self.settings.uri:
            log.warning(
                "the parent run is in %s but this job logs to %s: no parent link",
                link.parent_tracking_uri,
                self.settings.uri,
            )
            return None
        return link

    def _run_name(self) -> str | None:
        return self.settings.run_name or self.link.run_name

    def _start_tags(self, parent: RunLink | None) -> dict[str, str]:
        tags = {OUTCOME_TAG: RUNNING, ROLE_TAG: "run", **self.link.tags}
        if parent is not None:
            tags[PARENT_TAG] = parent.parent_run_id
        return tags

    def _active(self) -> tuple[MlflowClient, str]:
        if self._client is None or self._run_id is None:
            raise RuntimeError("the tracker is not started: use it as `with tracker:`")
        return self._client, self._run_id

    def _write_outcome(self) -> None:
        client, run_id = self._active()
        client.set_tag(run_id, OUTCOME_TAG, self.outcome)
        if self.stop_reason:
            client.set_tag(run_id, STOP_REASON_TAG, self.stop_reason)

    def _finish(self, status: str) -> None:
        client, run_id = self._active()
        try:
            if self._writer is not None:
                self._writer.close()
        finally:
            self._write_outcome()
            client.set_terminated(run_id, status=status)
            log.info("MLflow run %s ended: %s (%s)", run_id, self.outcome, status)

    def log_params(self, cfg: DictConfig) -> None:
        from mlflow.entities import Param

        client, run_id = self._active()
        params = flatten_config(cfg)
        params.update(git_state(Path(__file__).resolve().parents[2]))
        if "seed" not in params:
            log.warning("the config has no top-level `seed`: no seed param logged")
        params = truncate_params({sanitize_key(k): v for k, v in params.items()},
                                 self.settings.param_value_max)
        items = [Param(k, v) for k, v in params.items()]
        for start in range(0, len(items), MAX_PARAMS_TAGS_PER_BATCH):
            client.log_batch(run_id, params=items[start : start + MAX_PARAMS_TAGS_PER_BATCH])
        client.set_tag(run_id, "mlflow.source.git.commit", params["git.commit"])

    def set_tag(self, key: str, value: str) -> None:
        client, run_id = self._active()
        client.set_tag(run_id, key, value)

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        if self._writer is None:
            raise RuntimeError("the tracker is not started: use it as `with tracker:`")
        timestamp = time.time_ns() // 1_000_000
        step = int(step)
        keys = self._keys
        rows = []
        for key, value in metrics.items():
            clean = keys.get(key)
            if clean is None:
                clean = keys[key] = sanitize_key(key)
            rows.append((clean, float(value), timestamp, step))
        self._writer.add(rows)

    def log_samples(self, rows: Sequence[Mapping[str, Any]], step: int) -> None:
        client, run_id = self._active()
        if not rows:
            log.info("no samples to log at step %d", step)
            return
        client.log_table(run_id, data=table_columns(rows), artifact_file=f"samples/step_{step:06d}.json")

    def log_dict(self, obj: Mapping[str, Any], artifact_file: str) -> None:
        client, run_id = self._active()
        client.log_dict(run_id, dict(obj), artifact_file)

    def log_config_yaml(self, cfg: DictConfig) -> None:
        client, run_id = self._active()
        client.log_text(run_id, OmegaConf.to_yaml(cfg, resolve=True), "config.yaml")

    def log_artifacts(self, local_dir: str | Path, artifact_path: str | None = None) -> None:
        client, run_id = self._active()
        client.log_artifacts(run_id, str(local_dir), artifact_path)


def make_tracker(cfg: DictConfig, link: RunLink | None = None) -> Tracker:
    """The tracker `cfg.tracking` asks for, placed by `link` (the runs pass rookworld.app.hooks.run_link(cfg));
    relative sqlite paths resolve against Hydra's cwd."""
    settings = TrackingSettings.from_config(cfg.tracking, hydra_base_dir())
    if settings.backend == "none":
        return NullTracker()
    return MlflowTracker(settings, link)
