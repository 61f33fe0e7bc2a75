"""The step-0 evaluation is computed once per starting model and reused, logged exactly the same."""
import json

import pytest
import torch

from rookworld.judge.eval_cache import EvalCache
from rookworld.tracking import make_tracker
from rookworld.run.build import build_run
from rookworld.app.config import load_run
from rookworld.train import run
from train_helpers import tiny_config

FAST = ["model=tiny", "steps=1", "tracking=mlflow"]


def step0_metrics(uri: str) -> list[dict[str, float]]:
    """eval/* at step 0 of every run in the store, oldest first."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("rookworld")
    runs = sorted(client.search_runs([experiment.experiment_id]), key=lambda r: r.info.start_time)
    return [{key: next(m.value for m in client.get_metric_history(r.info.run_id, key) if m.step == 0)
             for key in r.data.metrics if key.startswith("eval/")} for r in runs]


@pytest.mark.slow
def test_a_second_run_reuses_the_step0_evaluation_and_logs_it_identically(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cache = tmp_path / "cache"
    common = [*FAST, f"tracking.uri={uri}", f"eval.cache_dir={cache}"]
    first = run(tiny_config(tmp_path / "a", *common))
    assert "(cached:" not in capsys.readouterr().out
    [stored] = list(cache.glob("*.json"))
    written = stored.stat().st_mtime_ns

    second = run(tiny_config(tmp_path / "b", *common))
    assert "eval @ step 0: eval/score=" in (out := capsys.readouterr().out) and f"(cached: {stored})" in out
    assert stored.stat().st_mtime_ns == written and list(cache.glob("*")) == [stored]  # read, not rewritten
    assert first.final_eval == second.final_eval
    runs = step0_metrics(uri)
    assert len(runs) == 2 and runs[0] == runs[1] and "eval/score" in runs[0]  # the curve starts at step 0 in both

    run(tiny_config(tmp_path / "c", *common, "model.tiny.seed=1"))  # other weights: another key
    assert "(cached:" not in capsys.readouterr().out and len(list(cache.glob("*.json"))) == 2


def test_reusing_the_evaluation_leaves_the_run_unchanged(tmp_path):
    """Greedy decoding draws nothing from the generator: a run that reuses the result continues identically."""
    states = []
    for name in ("computed", "reused"):
        cfg = tiny_config(tmp_path / name, "model=tiny", "steps=1", "tracking=none", f"eval.cache_dir={tmp_path}/cache")
        trainer = build_run(load_run(cfg), make_tracker(cfg))
        trainer.fit()
        states.append(trainer.generator.get_state())
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1
    assert torch.equal(states[0], states[1])


def test_problem_scores_make_up_the_task_scores(tmp_path):
    cfg = tiny_config(tmp_path, "tracking=none", "eval.num_policy=3", "eval.num_arbiter=3")
    trainer = build_run(load_run(cfg), make_tracker(cfg))
    result = trainer.evaluate(0)
    scores, metrics = result.problem_scores, result.metrics
    assert len(scores) == 6
    assert sum(scores[:3]) / 3 == pytest.approx(metrics["eval/P/score"])
    assert sum(scores[3:]) / 3 == pytest.approx(metrics["eval/A/score"])
    assert EvalCache(str(tmp_path / "eval_cache"), "x").path.parent == tmp_path / "eval_cache"
    [stored] = (tmp_path / "eval_cache").glob("*.json")
    assert json.loads(stored.read_text())["problem_scores"] == scores
