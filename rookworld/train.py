"""`python -m rookworld.train [overrides]`: one GRPO run composed from conf/.

Returns the RunResult: its `objective` (eval/score at the end, or objective.failure_penalty for a
failed outcome) is what the Optuna sweeper optimises, its `outcome` what the study records.
"""
from __future__ import annotations

import hydra
from omegaconf import DictConfig

from rookworld.components import build_trainer
from rookworld.config import PROJECT_TARGETS, load_run
from rookworld.composition import run_hydra_main
from rookworld.errors import as_command
from rookworld.evaluate import describe_change
from rookworld.hooks import build_step_hooks, run_link
from rookworld.tracking import NullTracker, make_tracker
from rookworld.trainer import RunResult


def run(cfg: DictConfig) -> RunResult:
    """Validate, load the model and data, then open the MLflow run: a bad value, model or data path
    fails before a run exists."""
    spec = load_run(cfg)
    trainer = build_trainer(spec, NullTracker(), build_step_hooks(cfg))
    with make_tracker(cfg, run_link(cfg)) as tracker:
        tracker.log_params(cfg)
        tracker.log_config_yaml(cfg)
        trainer.tracker = tracker
        result = trainer.fit()
    if trainer.first_eval is not None and trainer.last_eval is not None and result.final_eval:
        print(describe_change(trainer.first_eval, trainer.last_eval, [p.task for p in trainer.heldout], result.steps))
    return result


@hydra.main(config_path="../conf", config_name="config", execution_whitelist=PROJECT_TARGETS)
def main(cfg: DictConfig) -> RunResult:
    with as_command():
        return run(cfg)


if __name__ == "__main__":
    run_hydra_main(main, "config")
