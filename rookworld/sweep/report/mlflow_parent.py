"""MLflow parent runs of sweeps: one per Optuna study (rookworld's sweeper), or one per plain multirun.

`sweep_parent` makes or finds every parent run and writes its id to the launch folder's `.mlflow_parent_run`,
where each trial's Tracker finds it; a study keeps its parent's id in its user attr `rookworld:mlflow_parent`.
Plain multiruns (Hydra's basic sweeper) get theirs from the Hydra callback below, before any job (so parallel
jobs never race to create a fresh sqlite store). docs/tracking.md (Sweeps: how children find their parent) has
the rest. Hydra 1.4 turns a callback's exception into a warning: errors here are logged in full first.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from rookworld.tracking import (
    MAX_PARAMS_TAGS_PER_BATCH,
    MAX_TAG_LENGTH,
    OUTCOME_TAG,
    OVERRIDES_TAG,
    ROLE_TAG,
    STOP_REASON_TAG,
    STUDY_TAG,
    TrackingSettings,
    absolute_path,
    get_or_create_experiment,
    hydra_base_dir,
    open_store,
    overrides_tag,
)
from rookworld.sweep.job.context import ParentRef, study_name, write_parent_ref
from rookworld.sweep.report.summary import (STUDY, SweepSummary, fetch_study_runs, format_value, run_trial_number,
                                     summarise_children, summarise_study, summary_dict, summary_markdown)

if TYPE_CHECKING:
    import optuna
    from mlflow import MlflowClient

log = logging.getLogger(__name__)
SWEEP_DIR_TAG = "rookworld.sweep_dir"
SUMMARY_ARTIFACT_DIR = "sweep_summary"
STUDY_ARTIFACT = "optuna_study"
PARENT_ATTR = "rookworld:mlflow_parent"  # the study's user attr holding its parent run (ParentRef fields)
ROOKWORLD_SWEEPER = "rookworld.sweep.sweeper.RookworldOptunaSweeper"


def tracking_enabled(config: DictConfig) -> bool:
    return OmegaConf.select(config, "tracking.backend", default=None) == "mlflow"


def sweep_parent(client: MlflowClient, settings: TrackingSettings, study: str, overrides: Any, launch_dir: Path, *,
                 find: bool, stored_id: str | None = None, reopen: bool = True, tags: dict[str, str] | None = None
                 ) -> ParentRef:
    """The one place a sweep's MLflow parent run is made or found, its id then written to `launch_dir`'s parent-run
    file for every trial's Tracker. `find` (an Optuna study, under its lock): the run `stored_id` names, else the
    experiment's parent run of `study` (another spelling of the store's URI stored it), reopened (`reopen`) if it
    had ended; else, and always for a plain multirun, a new one."""
    run = find_study_parent(client, settings, study, stored_id) if find else None
    if run is None:
        experiment_id = get_or_create_experiment(client, settings)
        tags = {ROLE_TAG: "sweep_parent", STUDY_TAG: study, OVERRIDES_TAG: overrides_tag(overrides), **(tags or {})}
        run = client.create_run(experiment_id, run_name=study, tags=tags)
        log.info("MLflow parent run %s for study %s", run.info.run_id, study)
    elif reopen and run.info.status != "RUNNING":
        client.update_run(run.info.run_id, status="RUNNING")
        log.info("MLflow parent run %s of study %s reopened", run.info.run_id, study)
    parent = ParentRef(run.info.run_id, run.info.experiment_id, settings.uri)
    write_parent_ref(launch_dir, parent)
    return parent


def study_parent_run(client: MlflowClient, settings: TrackingSettings, config: DictConfig, study: optuna.Study,
                     launch_dir: Path, reopen: bool = True) -> ParentRef:
    """The Optuna study's parent run (sweep_parent; call it under the study's lock), its id kept in the study."""
    stored = study.user_attrs.get(PARENT_ATTR) or {}
    parent = sweep_parent(client, settings, study.study_name, config.hydra.overrides.task, launch_dir, find=True,
                          stored_id=stored.get("run_id"), reopen=reopen)
    if stored.get("run_id") != parent.run_id:
        study.set_user_attr(PARENT_ATTR, parent.__dict__)
    return parent


def find_study_parent(client: MlflowClient, settings: TrackingSettings, study: str, stored_id: str | None) -> Any:
    """The study's parent run in this store, found by the id the study holds or by its tags; None if it has none."""
    from mlflow.exceptions import MlflowException  # mlflow stays lazy: a sweep with tracking=none never imports it

    if stored_id:
        try:
            run = client.get_run(stored_id)
        except MlflowException:
            run = None  # another tracking store: look for this study's parent there
        if run is not None and run.info.lifecycle_stage == "active":
            return run
    experiment = client.get_experiment_by_name(settings.experiment)
    if experiment is None:
        return None
    found = client.search_runs([experiment.experiment_id], max_results=1, order_by=["attributes.start_time ASC"],
                               filter_string=f"tags.`{STUDY_TAG}` = '{study}' and tags.`{ROLE_TAG}` = 'sweep_parent'")
    return found[0] if found else None


def end_orphan_runs(client: MlflowClient, experiment_id: str, study: optuna.Study) -> int:
    """End the study's trial runs still running whose Optuna trial is no longer RUNNING (a killed worker): by
    outcome tag, or by MLflow status (a worker killed after tagging its outcome, before ending the run)."""
    states = {t.number: t.state for t in study.get_trials(deepcopy=False)}
    ended = 0
    for run in fetch_study_runs(client, experiment_id, study.study_name):
        number = run_trial_number(run)
        running = run.data.tags.get(OUTCOME_TAG) == "running" or run.info.status == "RUNNING"
        if not running or number is None:
            continue
        state = states.get(number)
        if state is None or state.name == "RUNNING":
            continue
        client.set_tag(run.info.run_id, OUTCOME_TAG, "failed")
        client.set_tag(run.info.run_id, STOP_REASON_TAG,
                       f"its worker stopped while it ran (killed sweep or lost machine): Optuna trial {number} {state.name}")
        client.set_terminated(run.info.run_id, status="KILLED")
        ended += 1
    return ended


def finish_study_parent(client: MlflowClient, parent: ParentRef, study: optuna.Study, top_k: int,
                        log_scale: tuple[str, ...]) -> str:
    """Summarise the study (Optuna states) and its children (MLflow) onto the parent and end it."""
    end_orphan_runs(client, parent.experiment_id, study)
    summary = summarise_study(study, fetch_study_runs(client, parent.experiment_id, study.study_name))
    log_summary(client, parent.run_id, summary)
    return finish_parent_run(client, parent.run_id, summary.direction, top_k, log_scale)


def start_parent_run(config: DictConfig) -> tuple[MlflowClient, ParentRef]:
    """A plain multirun's parent run (sweep_parent), its id in the sweep dir."""
    base_dir = hydra_base_dir()
    settings = TrackingSettings.from_config(config.tracking, base_dir)
    client = open_store(settings)
    sweep_dir = absolute_path(str(config.hydra.sweep.dir), base_dir)
    sweeper_study = OmegaConf.select(config, "hydra.sweeper.study_name", default=None)
    study = study_name(config, sweeper_study, str(config.hydra.sweep.dir))
    parent = sweep_parent(client, settings, study, config.hydra.overrides.task, sweep_dir, find=False,
                          tags={SWEEP_DIR_TAG: str(sweep_dir)})
    return client, parent


def finish_parent_run(client: MlflowClient, parent_run_id: str, direction: Any, top_k: int,
                      log_scale: tuple[str, ...] = ()) -> str:
    """Summarise the children onto the parent, end it, and return the markdown summary."""
    try:
        summary = summarise_children(client, parent_run_id, direction, log_scale)
        log_summary(client, parent_run_id, summary, top_k)
    except Exception:
        client.set_terminated(parent_run_id, status="FAILED")
        raise
    client.set_terminated(parent_run_id, status="FINISHED")
    return summary_markdown(summary)


# ---------------------------------------------------------------- summaries on the parent run


def _log_files(client: MlflowClient, run_id: str, summary: SweepSummary, name: str, top_k: int | None) -> None:
    """`<name>.md` and `<name>.json` (and, with `top_k`, the plots) under `sweep_summary/` on the run."""
    with tempfile.TemporaryDirectory(prefix="rookworld-sweep-") as tmp:
        directory = Path(tmp)
        (directory / f"{name}.md").write_text(summary_markdown(summary))
        (directory / f"{name}.json").write_text(json.dumps(summary_dict(summary), indent=2, default=str))
        if top_k is not None:
            # matplotlib only here: every trial process of an MLflow-tracked multirun imports this module
            # (the Hydra callback below), and the import costs about half a second
            from rookworld.sweep.report.plots import write_plots

            write_plots(client, summary, directory, top_k)
        client.log_artifacts(run_id, tmp, SUMMARY_ARTIFACT_DIR)


def log_summary(client: MlflowClient, run_id: str, summary: SweepSummary, top_k: int | None = None) -> None:
    """A summary on the parent run: counts (metrics), the best trial (a metric, tags) and files (sweep_summary/).
    The children's as `sweep.*` with summary.md, .json and (with `top_k`) the plots; the study's Optuna states as
    `sweep.optuna.*` with optuna_study.md, .json. Metrics and tags only: summarising again updates it in place."""
    from mlflow.entities import Metric, RunTag  # mlflow stays lazy: a sweep with tracking=none never imports it

    study = summary.source == STUDY
    prefix = "sweep.optuna." if study else "sweep."
    _log_files(client, run_id, summary, STUDY_ARTIFACT if study else "summary", None if study else top_k)
    counts = {s.lower(): n for s, n in summary.state_counts.items()} if study else \
        {"trials": len(summary.trials), **summary.outcome_counts}
    values = {f"{prefix}n_{key}": n for key, n in counts.items()}
    tags = {} if study else {"sweep.direction": summary.direction}
    best = summary.best
    if best is not None:
        values[prefix + ("best_value" if study else "best_objective")] = best.objective
        tags[prefix + "best_trial"] = str(best.trial)
        shown = best.params if study else summary.params  # a children summary: every swept param, "" if unset
        tags.update({f"{prefix}best.{k}": format_value(best.params.get(k, "")) for k in shown})
        if not study:
            tags["sweep.best_run_id"] = str(best.run_id)
    timestamp = time.time_ns() // 1_000_000
    client.log_batch(run_id, metrics=[Metric(k, float(v), timestamp, len(summary.trials)) for k, v in values.items()])
    items = [RunTag(k, v[:MAX_TAG_LENGTH]) for k, v in tags.items()]
    for start in range(0, len(items), MAX_PARAMS_TAGS_PER_BATCH):
        client.log_batch(run_id, tags=items[start : start + MAX_PARAMS_TAGS_PER_BATCH])


class MLflowSweepCallback(Callback):
    """Parent MLflow run for a Hydra multirun (see the module docstring)."""

    def __init__(self) -> None:
        self._client: MlflowClient | None = None
        self._parent: ParentRef | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweeper = OmegaConf.select(config, "hydra.sweeper._target_", default=None)
        if not tracking_enabled(config) or sweeper == ROOKWORLD_SWEEPER:  # that sweeper has a parent per study
            return
        try:
            self._client, self._parent = start_parent_run(config)
        except Exception:
            log.exception("creating the MLflow sweep parent run failed")
            raise

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self._client is None or self._parent is None:
            return
        direction, top_k = OmegaConf.select(config, "hydra.sweeper.direction") or "maximize", config.tracking.summary_top_k
        try:
            markdown = finish_parent_run(self._client, self._parent.run_id, direction, int(top_k))
        except Exception:
            log.exception("summarising the sweep into MLflow run %s failed", self._parent.run_id)
            raise
        print(markdown, flush=True)
