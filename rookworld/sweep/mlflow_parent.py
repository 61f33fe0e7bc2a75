"""Hydra callback giving a multirun one MLflow parent run, summarised when the sweep ends.

Registered by conf/tracking/mlflow.yaml (`hydra.callbacks.mlflow_sweep`); it acts only in a
multirun with `tracking.backend: mlflow`.

- `on_multirun_start`, before any job: opens the store (this creates a fresh sqlite DB once, so
  parallel jobs never race on its creation), gets or creates the experiment, creates the parent
  run and writes its id to `<sweep dir>/.mlflow_parent_run`. Each job's Tracker reads that file
  (any launcher, any process) and tags its run `mlflow.parentRunId`.
- `on_multirun_end`: summarises the children (rookworld.sweep.summary) onto the parent: metrics
  `sweep.n_trials`, `sweep.n_<outcome>`, `sweep.best_objective`; tags `sweep.best_run_id`,
  `sweep.best_trial`, `sweep.best.<param>`; artifacts under `sweep_summary/` (summary.md,
  summary.json, optimisation_history.png, outcome_vs_params.png, reward_curves.png). The
  markdown summary is printed. Direction: `hydra.sweeper.direction`, else maximize.

Note: Hydra 1.4 turns an exception raised by a callback into a warning; errors here are logged
in full first.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from rookworld.tracking import (
    OVERRIDES_TAG,
    ROLE_TAG,
    STUDY_TAG,
    TrackingSettings,
    absolute_path,
    get_or_create_experiment,
    hydra_base_dir,
    open_store,
    overrides_tag,
)
from rookworld.sweep.context import ParentRef, study_name, write_parent_ref

if TYPE_CHECKING:
    from mlflow import MlflowClient

log = logging.getLogger(__name__)
SWEEP_DIR_TAG = "rookworld.sweep_dir"


def tracking_enabled(config: DictConfig) -> bool:
    return OmegaConf.select(config, "tracking.backend", default=None) == "mlflow"


def sweep_direction(config: DictConfig) -> Any:
    return OmegaConf.select(config, "hydra.sweeper.direction", default=None) or "maximize"


def start_parent_run(config: DictConfig) -> tuple[MlflowClient, ParentRef]:
    """Create the store, experiment and parent run; write the parent-run file in the sweep dir."""
    base_dir = hydra_base_dir()
    settings = TrackingSettings.from_config(config.tracking, base_dir)
    client = open_store(settings)
    experiment_id = get_or_create_experiment(client, settings)
    sweep_dir = absolute_path(str(config.hydra.sweep.dir), base_dir)
    sweeper_study = OmegaConf.select(config, "hydra.sweeper.study_name", default=None)
    study = study_name(config, sweeper_study, str(config.hydra.sweep.dir))
    tags = {
        ROLE_TAG: "sweep_parent",
        STUDY_TAG: study,
        SWEEP_DIR_TAG: str(sweep_dir),
        OVERRIDES_TAG: overrides_tag(config.hydra.overrides.task),
    }
    run = client.create_run(experiment_id, run_name=study, tags=tags)
    parent = ParentRef(run.info.run_id, experiment_id, settings.uri)
    path = write_parent_ref(sweep_dir, parent)
    log.info("MLflow sweep parent run %s (study %s), id in %s", parent.run_id, study, path)
    return client, parent


def finish_parent_run(
    client: MlflowClient, parent_run_id: str, direction: Any, top_k: int
) -> str:
    """Summarise the children onto the parent, end it, and return the markdown summary."""
    from rookworld.sweep.summary import log_summary, summarise_children, summary_markdown

    try:
        summary = summarise_children(client, parent_run_id, direction)
        log_summary(client, summary, top_k)
    except Exception:
        client.set_terminated(parent_run_id, status="FAILED")
        raise
    client.set_terminated(parent_run_id, status="FINISHED")
    return summary_markdown(summary)


class MLflowSweepCallback(Callback):
    """Parent MLflow run for a Hydra multirun (see the module docstring)."""

    def __init__(self) -> None:
        self._client: MlflowClient | None = None
        self._parent: ParentRef | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if not tracking_enabled(config):
            return
        try:
            self._client, self._parent = start_parent_run(config)
        except Exception:
            log.exception("creating the MLflow sweep parent run failed")
            raise

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self._client is None or self._parent is None:
            return
        top_k = int(config.tracking.summary_top_k)
        try:
            markdown = finish_parent_run(
                self._client, self._parent.run_id, sweep_direction(config), top_k
            )
        except Exception:
            log.exception("summarising the sweep into MLflow run %s failed", self._parent.run_id)
            raise
        print(markdown, flush=True)
