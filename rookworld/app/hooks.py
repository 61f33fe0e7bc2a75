"""What a driver (a sweep) adds to a run, without the run importing the driver.

The config names the additions by `_target_` (with `_partial_: true`); the run builds each and
calls it with the composed config, as lightning-hydra-template adds callbacks:

- `trial.hooks`: step hooks (conf/trial/optuna.yaml lists Optuna's pruning hook; conf/trial/none.yaml
  none). Each is a factory `(cfg) -> StepHook`.
- `tracking.run_link`: where the run is filed in MLflow (conf/tracking/mlflow.yaml: a multirun job
  becomes a child of its sweep's parent run). A factory `(cfg) -> RunLink | None`; null files
  nothing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rookworld.app.config import build
from rookworld.tracking import RunLink

if TYPE_CHECKING:  # the trainer's protocol: the run sits below its entry points' plumbing
    from rookworld.run.trainer import StepHook


def build_step_hooks(cfg: DictConfig) -> list[StepHook]:
    """The step hooks `trial.hooks` names, in the order listed (each a trainer.StepHook)."""
    return [build(factory)(cfg) for factory in cfg.trial.hooks.values()]


def run_link(cfg: DictConfig) -> RunLink | None:
    """Where `tracking.run_link` files this run (None: a top-level run)."""
    factory = cfg.tracking.run_link
    return None if factory is None else build(factory)(cfg)
