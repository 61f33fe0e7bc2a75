"""`python -m rookworld.train [overrides]`: one GRPO run composed from conf/.

Returns the RunResult: its `objective` (eval/score at the end, or objective.failure_penalty for a
failed outcome) is what the Optuna sweeper optimises, its `outcome` what the study records.
"""
from __future__ import annotations

import hydra
from omegaconf import DictConfig

from rookworld.components import build_trainer
from rookworld.config import PROJECT_TARGETS, validate
from rookworld.errors import exit_on_user_error
from rookworld.sweep.context import trial_link
from rookworld.tracking import make_tracker
from rookworld.trainer import RunResult


def run(cfg: DictConfig) -> RunResult:
    validate(cfg)
    with make_tracker(cfg, trial_link(cfg)) as tracker:
        tracker.log_params(cfg)
        tracker.log_config_yaml(cfg)
        return build_trainer(cfg, tracker).fit()


@hydra.main(config_path="../conf", config_name="config", execution_whitelist=PROJECT_TARGETS)
def main(cfg: DictConfig) -> RunResult:
    with exit_on_user_error():
        return run(cfg)


if __name__ == "__main__":
    main()
