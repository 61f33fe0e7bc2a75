"""Pruning on the objective: the Wilcoxon pruner on paired per-problem scores (either direction), the
outcome a job records on its trial, and a study where every trial diverges (no best trial)."""
from __future__ import annotations

import random
from pathlib import Path

import optuna

from rookworld.sweep.storage.storage_url import default_timeouts
import pytest
from omegaconf import OmegaConf
from optuna.trial import TrialState

from rookworld.app.config import compose
from rookworld.specs.rules import ConfigError
from rookworld.app.hooks import build_step_hooks, run_link
from rookworld.outcomes import DIVERGED_KL_GROWTH, KL_FAILURE
from rookworld.judge.evaluate import EvalResult
from rookworld.sweep.job.pruning import OptunaPruningHook
from rookworld.sweep.storage.study import OUTCOME_ATTR
from rookworld.sweep.storage.study import open_storage
from rookworld.sweep.report.summary import RUNS, SweepSummary, TrialRow, study_row, summarise_study, summary_markdown
from rookworld.train import run
from train_helpers import tiny_config

optuna.logging.set_verbosity(optuna.logging.WARNING)
WILCOXON = {"kind": "wilcoxon", "p_threshold": 0.1, "n_startup_steps": 2}


def new_study(tmp_path: Path, direction: str, name: str = "unit") -> tuple[optuna.Study, str]:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    storage = open_storage(url, str(tmp_path), default_timeouts())
    return optuna.create_study(study_name=name, storage=storage, direction=direction), url


def start_trial(study: optuna.Study, url: str, pruner: dict, penalty: float = -1.0) -> OptunaPruningHook:
    """A RUNNING trial as the sweeper asks it, and its job's hook."""
    trial = study.ask()
    cfg = OmegaConf.create({"trial": {"number": trial.number, "study": study.study_name, "storage": url,
                                      "metric": "eval/score", "every": 1, "window": 1, "pruner": pruner},
                            "objective": {"failure_penalty": penalty}})
    return OptunaPruningHook.from_config(cfg)


def test_the_run_builds_what_its_config_names_and_nothing_else(tmp_path):
    """trial=optuna lists the pruning hook (a config _target_): the run builds it bound to its trial; the
    default trial=none lists none. Outside a multirun, no run is filed under a parent."""
    study, url = new_study(tmp_path, "maximize")
    trial = study.ask()
    sweep = compose(["trial=optuna", f"trial.number={trial.number}", f"trial.study={study.study_name}",
                     f"trial.storage={url}"])
    [hook] = build_step_hooks(sweep)
    assert isinstance(hook, OptunaPruningHook) and hook.trial.number == trial.number
    assert build_step_hooks(compose([])) == []
    assert run_link(compose([])) is None and run_link(compose(["tracking=none"])) is None
    assert run_link(compose([], "sft")) is None  # the supervised warm start files its run the same way


def evaluation(scores: list[float]) -> EvalResult:
    return EvalResult(metrics={"eval/score": sum(scores) / len(scores)}, problem_scores=scores)


def positions(n: int = 32, seed: int = 0) -> list[float]:
    """Per-problem difficulty: some positions easy, some hard, for every trial alike."""
    rng = random.Random(seed)
    return [rng.uniform(0.1, 0.8) for _ in range(n)]


@pytest.mark.parametrize("direction, sign", [("maximize", 1.0), ("minimize", -1.0)])
def test_wilcoxon_prunes_a_clearly_worse_trial_on_the_same_positions(tmp_path, direction, sign):
    base = positions()
    penalty = -1.0 if direction == "maximize" else 2.0
    study, url = new_study(tmp_path, direction)
    best = start_trial(study, url, WILCOXON, penalty)
    good = [b + sign * 0.1 for b in base]  # better on every position, in the study's direction
    for step in (10, 20):
        assert not best.should_prune(step, {}, evaluation(good))
    study.tell(best.trial, sum(good) / len(good))

    # worse by 0.05 on each position: far inside the spread between positions, clear when paired
    worse = start_trial(study, url, WILCOXON, penalty)
    assert not worse.should_prune(10, {})  # no evaluation this step: nothing to report
    assert worse.should_prune(10, {}, evaluation([b - sign * 0.05 for b in base]))
    pruned = study.trials[worse.trial.number]
    assert pruned.state == TrialState.PRUNED and len(pruned.intermediate_values) == len(base)
    assert set(pruned.intermediate_values) == set(range(10 * len(base), 11 * len(base)))  # paired step ids
    assert study_row(pruned, "-").last_step == 10  # the summary shows the training step, not the paired id

    # as good as the best, position by position up and down: kept
    even = start_trial(study, url, WILCOXON, penalty)
    assert not even.should_prune(10, {}, evaluation([g + (0.02 if i % 2 else -0.02) for i, g in enumerate(good)]))
    assert study.best_trial.number == best.trial.number  # a pruned trial is never best


def test_the_failure_penalty_must_rank_below_every_score_in_the_study_direction(tmp_path):
    study, url = new_study(tmp_path, "minimize")
    with pytest.raises(ConfigError, match=r"^objective.failure_penalty=-1.0: a minimize study needs a penalty above"):
        start_trial(study, url, WILCOXON, penalty=-1.0)


def test_summaries_never_name_a_pruned_or_failed_trial_best():
    def trial(number: int, outcome: str, objective: float) -> TrialRow:
        return TrialRow(number, outcome, objective, {}, run_id=f"run{number}", status="FINISHED")

    failed = [trial(0, KL_FAILURE, -1.0), trial(1, "pruned", 0.56), trial(2, DIVERGED_KL_GROWTH, -1.0)]
    assert SweepSummary(RUNS, "s", "maximize", tuple(failed), ()).best is None
    assert SweepSummary(RUNS, "s", "minimize", tuple(failed), ()).best is None
    with_success = (*failed, trial(3, "success", 0.61))
    assert SweepSummary(RUNS, "s", "minimize", with_success, ()).best.trial == 3


@pytest.mark.slow
def test_a_study_where_every_trial_diverges_names_no_best_trial(tmp_path):
    """Two real runs on the tiny model, each stopped by a divergence detector, told as the sweeper does."""
    study, url = new_study(tmp_path, "maximize", name="all_diverge")
    diverging = {0: ["optimizer.lr=1.0", "kl.max=1.0", "kl.max_steps_above=1"],  # KL above kl.max at once
                 1: ["optimizer.lr=1e-3", "kl.max=20.0", "guards.kl_growth.window=2",  # KL racing up (0, 0.31,
                     "guards.kl_growth.min_fraction=0.1"]}                   # 5.6): stopped by kl_growth
    stopped_at = []
    for number, overrides in diverging.items():
        study.ask()
        cfg = tiny_config(tmp_path / str(number), "task_mix=env_only", "steps=6", "optimizer.warmup_steps=0",
                          "eval.every=1", "trial=optuna", "trial/pruner=wilcoxon", f"trial.number={number}",
                          "trial.study=all_diverge", f"trial.storage={url}", *overrides)
        result = run(cfg)
        study.tell(number, result.objective, skip_if_finished=True)  # what the sweeper does with the return value
        stopped_at.append(result.steps)
    trials = study.trials
    assert [t.user_attrs[OUTCOME_ATTR] for t in trials] == [KL_FAILURE, DIVERGED_KL_GROWTH]
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2 and {t.value for t in trials} == {-1.0}
    # per-problem scores of 4 + 4 problems at each evaluation before the stop (every step but the last)
    assert [len(t.intermediate_values) for t in trials] == [8 * (steps - 1) for steps in stopped_at]
    assert stopped_at[0] == 2 and stopped_at[1] < 6

    summary = summarise_study(study)  # no MLflow runs: the outcomes come from the trials
    assert summary.best is None
    assert [t.outcome for t in summary.trials] == [KL_FAILURE, DIVERGED_KL_GROWTH]
    text = summary_markdown(summary)
    assert "Best: none (no trial finished successfully)." in text and "| diverged:kl_growth |" in text


def test_the_wilcoxon_config_builds_its_pruner():
    from hydra import compose, initialize_config_dir

    from rookworld.sweep.job.pruning import build_pruner
    from train_helpers import CONF_DIR

    with initialize_config_dir(config_dir=CONF_DIR):
        cfg = compose("config", overrides=["trial=optuna", "trial/pruner=wilcoxon"])
    assert isinstance(build_pruner(cfg.trial.pruner), optuna.pruners.WilcoxonPruner)
