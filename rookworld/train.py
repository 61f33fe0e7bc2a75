"""`python -m rookworld.train [overrides]`: one GRPO run composed from conf/.

Returns the RunResult: its `objective` (eval/score at the end, or objective.failure_penalty for a
failed outcome) is what the Optuna sweeper optimises, its `outcome` what the study records.
"""
from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import hydra
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from rookworld.app.config import PROJECT_TARGETS, load_run, resumed_config, value_sources
from rookworld.app.composition import run_hydra_main
from rookworld.app.errors import as_command, in_multirun, to_run_log
from rookworld.app.hooks import build_step_hooks, run_link
from rookworld.run.resume import check_checkpoint_folder
from rookworld.specs.inert import inert_warnings
from rookworld.specs.rules import ConfigError
from rookworld.tracking import CHANGE_TAG, NullTracker, make_tracker

if TYPE_CHECKING:  # torch and the model load in run(): a sweep's launcher and a refused command never need them
    from rookworld.judge.evaluate import Change
    from rookworld.outcomes import RunResult
    from rookworld.run.trainer import Trainer


def run(cfg: DictConfig) -> RunResult:
    """Validate, load the model and data, then open the MLflow run: a bad value, model or data path
    fails before a run exists. A run that evaluated at step 0 and at its end says what changed: the last
    line printed, in the run's log, and on the MLflow run (tag rookworld.change, metrics change/*)."""
    from rookworld.run.build import build_run

    spec = load_run(cfg)
    if spec.resume_from:
        check_checkpoint_folder(spec.resume_from)  # before the model loads (seconds, or a hub download)
    trainer = build_run(spec, NullTracker(), build_step_hooks(cfg))
    with make_tracker(cfg, run_link(cfg)) as tracker:
        tracker.log_params(cfg)
        tracker.log_config_yaml(cfg)
        trainer.tracker = tracker
        result = trainer.fit()
        change = run_change(trainer, result)
        if change is not None:
            tracker.set_tag(CHANGE_TAG, change.verdict)
            tracker.log_metrics(change.metrics(), step=result.steps)
    if change is not None:
        print(change.line)  # also the run log's last line (rookworld.app.errors.as_command)
    return result


def run_change(trainer: Trainer, result: RunResult) -> Change | None:
    """eval/score from step 0 to the final evaluation; None without both (a resumed or failed run)."""
    from rookworld.judge.evaluate import judge_change

    if trainer.first_eval is None or trainer.last_eval is None or not result.final_eval:
        return None
    return judge_change(trainer.first_eval, trainer.last_eval, [p.task for p in trainer.heldout], result.steps)


def warn_inert_knobs(cfg: DictConfig, overrides: list[str]) -> None:
    """A knob set by the command line, an experiment, a sweep preset or group_shape that the run's other settings
    switch off: one warning line each, naming where it was set."""
    for line in inert_warnings(cfg, value_sources(GlobalHydra.instance().config_loader(), overrides)):
        print(line, file=sys.stderr)
        to_run_log(line, logging.WARNING)


def refuse_a_sweep_without_multirun(preset: str | None) -> None:
    """A sweep preset selected without -m would run one trial-less job (its trial.number is the sweeper's to set)."""
    if preset is not None:
        raise ConfigError(f"sweeps={preset}: a sweep preset runs as a multirun: python -m rookworld.train -m "
                          f"sweeps={preset}")


@hydra.main(config_path="../conf", config_name="config", execution_whitelist=PROJECT_TARGETS)
def main(cfg: DictConfig) -> RunResult:
    with as_command():
        if not in_multirun():  # a sweep composes each trial's whole config itself
            job = HydraConfig.get()
            refuse_a_sweep_without_multirun(job.runtime.choices.get("sweeps"))
            cfg = resumed_config(cfg, job.overrides.task, job.runtime.choices)
            warn_inert_knobs(cfg, job.overrides.task)
        return run(cfg)


if __name__ == "__main__":
    run_hydra_main(main, "config")
