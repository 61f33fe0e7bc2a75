"""Training runs tracked in a real sqlite MLflow store, end to end through rookworld.train.run."""
import json

import pytest
import torch
from mlflow import MlflowClient

from rookworld.specs.rules import ConfigError
from rookworld.judge.evaluate import classify_change
from rookworld.tracking import CHANGE_TAG
from rookworld.train import run
from train_helpers import tiny_config

STEP_METRICS = ["reward", "reward_std", "reward/A", "reward/A/next_state", "frac_reward_zero_std", "kl",
                "entropy", "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean",
                "completions/mean_length", "completions/clipped_ratio", "loss", "grad_norm",
                "learning_rate", "step_time", "tokens_per_s"]


def tracked(tmp_path, *overrides):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = tiny_config(tmp_path, "tracking=mlflow", f"tracking.uri={uri}", "tracking.experiment=tests",
                      "task_mix=env_only", *overrides)
    return cfg, MlflowClient(uri)


def only_run(client):
    experiment = client.get_experiment_by_name("tests")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1
    return runs[0]


@pytest.mark.slow
def test_a_run_logs_params_metrics_tags_and_artifacts(tmp_path, capsys):
    cfg, client = tracked(tmp_path, "eval.every=1", "kl=fixed")
    result = run(cfg)
    logged = only_run(client)
    params = logged.data.params
    assert params["grpo.group_size"] == "3" and params["kl.estimator"] == "k2" and params["seed"] == "0"
    assert len(params["git.commit"]) == 40 and params["git.dirty"] in ("true", "false")
    for name in STEP_METRICS:
        history = client.get_metric_history(logged.info.run_id, name)
        assert [m.step for m in history] == [1, 2], name
    evals = client.get_metric_history(logged.info.run_id, "eval/score")
    assert [m.step for m in evals] == [0, 1, 2]
    # the last printed line (improved / worse / no change) is on the run too: tag rookworld.change, metrics
    # change/eval_score (the final eval/score - step 0's) and change/stderr (its paired standard error)
    change, stderr = logged.data.metrics["change/eval_score"], logged.data.metrics["change/stderr"]
    assert change == pytest.approx(evals[-1].value - evals[0].value)
    assert logged.data.tags[CHANGE_TAG] == classify_change(change, stderr)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    words = {"improved": "improved", "worse": "worse", "no_change": "no change beyond the standard error"}
    assert last.startswith(f"{words[logged.data.tags[CHANGE_TAG]]} after 2 steps: eval/score {evals[0].value:.4f} -> "
                           f"{evals[-1].value:.4f} ({change:+.4f}, paired standard error {stderr:.4f}"), last
    assert logged.data.metrics["objective"] == pytest.approx(result.objective)
    assert logged.data.tags["rookworld.outcome"] == "success"
    artifacts = {a.path for a in client.list_artifacts(logged.info.run_id)}
    assert {"config.yaml", "eval_final.json", "samples"} <= artifacts
    samples = {a.path for a in client.list_artifacts(logged.info.run_id, "samples")}
    assert samples == {"samples/step_000000.json", "samples/step_000001.json", "samples/step_000002.json"}
    table = json.loads(open(client.download_artifacts(logged.info.run_id, "samples/step_000002.json")).read())
    assert {"prompt", "completion", "reward", "ground_truth"} <= set(table["columns"])


def test_a_run_forced_into_kl_failure_is_tagged_kl_failure(tmp_path):
    cfg, client = tracked(tmp_path, "steps=6", "optimizer.lr=1.0", "optimizer.warmup_steps=0",
                          "kl.max=1.0", "kl.max_steps_above=1")
    assert run(cfg).outcome == "kl_failure"
    tags = only_run(client).data.tags
    assert tags["rookworld.outcome"] == "kl_failure" and "kl.max" in tags["rookworld.stop_reason"]


def test_a_run_that_raises_is_tagged_failed_with_the_message(tmp_path):
    (tmp_path / "a_file").write_text("")  # the step-0 evaluation cannot store its cache under a file
    cfg, client = tracked(tmp_path, f"eval.cache_dir={tmp_path}/a_file")
    with pytest.raises(FileExistsError):
        run(cfg)
    logged = only_run(client)
    assert logged.data.tags["rookworld.outcome"] == "failed"
    assert "a_file" in logged.data.tags["rookworld.stop_reason"]
    assert logged.info.status == "FAILED"


@pytest.mark.slow
def test_a_forced_resume_is_logged_on_the_run(tmp_path):
    run(tiny_config(tmp_path / "first", "task_mix=env_only", "steps=1", "checkpoint.every=1"))
    checkpoint = tmp_path / "first" / "checkpoints" / "step_000001"
    cfg, client = tracked(tmp_path, "steps=1", "optimizer.weight_decay=0.5", "resume_check.accept_changes=true",
                          f"resume_from={checkpoint}")
    run(cfg)
    logged = only_run(client)
    assert logged.data.params["resume_check.accept_changes"] == "true"
    changes = json.loads(open(client.download_artifacts(logged.info.run_id, "resume_changes.json")).read())
    assert changes["accepted"] == {"optimizer.weight_decay": [0.0, 0.5]}
    assert "tracking.backend" in changes["allowed"]  # the first run was not tracked


def no_runs(client):
    experiment = client.get_experiment_by_name("tests")
    return experiment is None or client.search_runs([experiment.experiment_id]) == []


def test_a_missing_data_file_fails_before_any_mlflow_run_opens(tmp_path):
    cfg, client = tracked(tmp_path, f"data.policy_validation={tmp_path}/missing.jsonl")
    with pytest.raises(ConfigError, match=r"^data\.policy_validation='.*missing\.jsonl': no such file"):
        run(cfg)
    assert no_runs(client)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_device_cuda_without_cuda_fails_before_any_mlflow_run_opens(tmp_path):
    cfg, client = tracked(tmp_path, "device=cuda")
    with pytest.raises(ConfigError, match="^device='cuda': CUDA is not available"):
        run(cfg)
    assert no_runs(client)
