"""The sweep summary's table reads as its runs did: a real Optuna study and real MLflow runs (sqlite) of
three trials that ended three ways: success after 6 steps, pruned at step 3, diverged after 6 steps."""

from __future__ import annotations

from pathlib import Path

import optuna
from mlflow import MlflowClient
from optuna.trial import TrialState

from rookworld.sweep.report.plots import outcome_vs_params_figure
from rookworld.sweep.report.summary import fetch_study_runs, summarise_children, summarise_study, summary_markdown
from rookworld.tracking import OUTCOME_TAG, PARENT_TAG, ROLE_TAG, STEPS_METRIC, STUDY_TAG, TRIAL_TAG

UNTRAINED_A = 0.5938  # eval/A/next_state of the untrained model, at step 0


def ran(client: MlflowClient, experiment: str, parent: str, trial: int, outcome: str, steps: int, objective: float,
        final_a: float | None) -> None:
    """A trial run as the trainer logs it: the step-0 evaluation, then (when it finished) its final one."""
    run = client.create_run(experiment, tags={STUDY_TAG: "s", ROLE_TAG: "trial", TRIAL_TAG: str(trial),
                                              PARENT_TAG: parent, OUTCOME_TAG: outcome}).info.run_id
    client.log_metric(run, "eval/A/next_state", UNTRAINED_A, step=0)
    if final_a is not None:
        client.log_metric(run, "eval/A/next_state", final_a, step=steps)
    client.log_metric(run, "objective", objective, step=steps)
    client.log_metric(run, STEPS_METRIC, steps, step=steps)
    client.log_param(run, "optimizer.lr", str(1e-5 * 10 ** trial))
    client.set_terminated(run)


def test_a_study_table_shows_each_runs_own_steps_score_and_final_skill(tmp_path: Path) -> None:
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("sweeps")
    parent = client.create_run(experiment, tags={STUDY_TAG: "s", ROLE_TAG: "sweep_parent"}).info.run_id
    study = optuna.create_study(study_name="s", direction="maximize")
    for number, (outcome, steps, objective, final_a) in enumerate([("success", 6, 0.31, 0.25),
                                                                   ("pruned", 3, 0.2995, None),
                                                                   ("diverged:kl_growth", 6, -1.0, None)]):
        trial = study.ask({"optimizer.lr": optuna.distributions.FloatDistribution(1e-6, 1.0, log=True)})
        trial.report(objective, 3)  # the pruner's last report, at step 3 for every trial
        study.tell(trial, state=TrialState.PRUNED) if outcome == "pruned" else study.tell(trial, objective)
        ran(client, experiment, parent, number, outcome, steps, objective, final_a)

    summary = summarise_study(study, fetch_study_runs(client, experiment, "s"))
    table = summary_markdown(summary)
    rows = [line.split(" | ")[:6] for line in table.splitlines() if line.startswith("| ") and line[2].isdigit()]
    # trial, state, objective, outcome, last step, A: next state (a final evaluation's only)
    assert rows == [["| 0", "COMPLETE", "0.31", "success", "6", "0.25"],
                    ["| 1", "PRUNED", "0.2995", "pruned", "3", "-"],
                    ["| 2", "COMPLETE", "-1", "diverged:kl_growth", "6", "-"]], table
    children = summary_markdown(summarise_children(client, parent))
    assert "| 1 | pruned | 0.2995 | - |" in children, children  # the same score in the children's table

    low, high = outcome_vs_params_figure(summary).axes[0].get_ylim()
    assert low > -0.5 and high > 0.3  # the -1 failure penalty is an x at the bottom, not the axis' range
