"""Where a multirun job sits in its sweep: the sweep context, the parent-run file the sweep callback
writes before any job starts, and the RunLink that makes a trial's tracking run a child of the
sweep's parent run (tagged `rookworld.trial`, `rookworld.study`, `rookworld.overrides`)."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from rookworld.tracking import OVERRIDES_TAG, ROLE_TAG, STUDY_TAG, TRIAL_TAG, RunLink, overrides_tag
from rookworld.tracking.settings import absolute_path, hydra_base_dir

log = logging.getLogger(__name__)

PARENT_RUN_FILE = ".mlflow_parent_run"


@dataclass(frozen=True)
class ParentRef:
    """What a sweep's parent-run file holds: enough for a child to attach to the parent."""

    run_id: str
    experiment_id: str
    tracking_uri: str


@dataclass(frozen=True)
class SweepContext:
    """Where a multirun job sits in its sweep."""

    sweep_dir: Path
    trial: int
    study: str
    overrides: tuple[str, ...]


def write_parent_ref(sweep_dir: Path, ref: ParentRef) -> Path:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    path = sweep_dir / PARENT_RUN_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(ref.__dict__))
    tmp.replace(path)  # atomic: a reader never sees half a file
    return path


def read_parent_ref(sweep_dir: Path) -> ParentRef | None:
    path = sweep_dir / PARENT_RUN_FILE
    if not path.exists():
        return None
    return ParentRef(**json.loads(path.read_text()))


def study_name(cfg: DictConfig, sweeper_study: str | None, sweep_dir: str) -> str:
    """`sweep.study_name` in the config, else the sweeper's `study_name`, else the sweep dir."""
    return str(OmegaConf.select(cfg, "sweep.study_name", default=None) or sweeper_study or sweep_dir)


def sweep_context(cfg: DictConfig) -> SweepContext | None:
    """The sweep this process's Hydra job belongs to, or None outside a multirun."""
    if not HydraConfig.initialized():
        return None
    hc = HydraConfig.get()
    if hc.mode != RunMode.MULTIRUN:
        return None
    trial = OmegaConf.select(cfg, "trial.number", default=None)
    if trial is None:
        trial = hc.job.num
    sweeper_study = OmegaConf.select(hc, "sweeper.study_name", default=None)
    return SweepContext(
        sweep_dir=absolute_path(str(hc.sweep.dir), hydra_base_dir()),
        trial=int(trial),
        study=study_name(cfg, sweeper_study, str(hc.sweep.dir)),
        overrides=tuple(str(o) for o in hc.overrides.task),
    )


def _extra_tags(cfg: DictConfig) -> dict:
    """trial.tags (a staged sweep's stage, configuration, seed...); none in a config without a trial group
    (an app that composes only tracking)."""
    return OmegaConf.select(cfg, "trial.tags", default=None) or {}


def trial_link(cfg: DictConfig) -> RunLink | None:
    """The tracking placement of this Hydra job: None outside a multirun; in one, the trial's name
    and tags, and the sweep's parent run when its file exists (None too when nothing is tracked)."""
    sweep = sweep_context(cfg)
    if sweep is None or OmegaConf.select(cfg, "tracking.backend") == "none":
        return None
    tags = {ROLE_TAG: "trial", TRIAL_TAG: str(sweep.trial), STUDY_TAG: sweep.study,
            OVERRIDES_TAG: overrides_tag(sweep.overrides),
            **{f"rookworld.{key}": str(value) for key, value in _extra_tags(cfg).items()}}
    parent = read_parent_ref(sweep.sweep_dir)
    if parent is None:
        log.warning("no %s in %s (sweep callback not enabled?): logging a run without parent",
                    PARENT_RUN_FILE, sweep.sweep_dir)
        return RunLink(run_name=f"trial_{sweep.trial:03d}", tags=tags)
    return RunLink(parent.run_id, parent.experiment_id, parent.tracking_uri, f"trial_{sweep.trial:03d}", tags)
