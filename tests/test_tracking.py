"""Tracking: the Tracker against real MLflow stores, the sweep callback in a real Hydra multirun,
and a real `mlflow server` over the store read through its REST API."""

from __future__ import annotations

import json
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from rookworld.sweep.job.context import PARENT_RUN_FILE
from rookworld.tracking import (
    OUTCOME_TAG,
    PARENT_TAG,
    STOP_REASON_TAG,
    STUDY_TAG,
    TRIAL_TAG,
    TrackingError,
    flatten_config,
    make_tracker,
    sanitize_key,
)

REPO = Path(__file__).resolve().parents[1]
SUMMARY_FILES = {
    "summary.md",
    "summary.json",
    "optimisation_history.png",
    "outcome_vs_params.png",
    "reward_curves.png",
}


TRACKING_DEFAULTS = OmegaConf.load(Path(__file__).resolve().parents[1] / "conf/tracking/mlflow.yaml").tracking


def make_cfg(uri: str, **tracking: Any) -> Any:
    """A run config whose `tracking` is conf/tracking/mlflow.yaml with the given keys replaced."""
    settings = OmegaConf.merge(TRACKING_DEFAULTS, {"uri": uri, "experiment": "tests", **tracking})
    return OmegaConf.create({
        "seed": 7,
        "steps": 5,
        "model": {"n_layer": 2, "n_embd": 64},
        "grpo": {"group_size": 4, "epsilons": [0.2, 0.28]},
        "optimizer": {"lr": 1e-5},
        "notes": "x" * 700,
        "tracking": settings,
    })


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"


@pytest.fixture(scope="module")
def client(store: str) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=store)


def download_json(client: Any, run_id: str, path: str, tmp_path: Path) -> Any:
    return json.loads(Path(client.download_artifacts(run_id, path, str(tmp_path))).read_text())


# ---------------------------------------------------------------- pure helpers


def test_sanitize_key_keeps_slashes_and_replaces_the_rest() -> None:
    assert sanitize_key("reward/P/format") == "reward/P/format"
    assert sanitize_key("clip_ratio/low_mean") == "clip_ratio/low_mean"
    assert sanitize_key("eval/score@1!") == "eval/score_1_"
    assert sanitize_key("/a//b/../c/") == "a/b/_/c"
    assert sanitize_key("") == "_"


def test_flatten_config_gives_dotted_keys_and_yaml_like_values() -> None:
    cfg = OmegaConf.create({"a": {"b": 1, "c": [1, 2], "d": [{"e": True}], "f": None}, "g": "${a.b}"})
    assert flatten_config(cfg) == {"a.b": "1", "a.c": "[1, 2]", "a.d.0.e": "true", "a.f": "null", "g": "1"}


def test_invalid_outcome_is_rejected() -> None:
    tracker = make_tracker(OmegaConf.create({"tracking": {"backend": "none"}}))
    with pytest.raises(ValueError, match="outcome must be one of"):
        with tracker:
            tracker.set_outcome("exploded")


def test_none_backend_never_imports_mlflow() -> None:
    code = textwrap.dedent("""
        import sys
        from omegaconf import OmegaConf
        from rookworld.tracking import make_tracker
        cfg = OmegaConf.create({"seed": 0, "tracking": {"backend": "none"}})
        with make_tracker(cfg) as tracker:
            tracker.log_params(cfg)
            tracker.log_metrics({"reward": 1.0}, step=0)
            tracker.log_samples([{"prompt": "p"}], step=0)
            tracker.log_dict({"a": 1}, "eval_final.json")
            tracker.log_config_yaml(cfg)
            tracker.set_outcome("success")
        assert tracker.outcome == "success"
        assert "mlflow" not in sys.modules, "mlflow was imported"
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# ---------------------------------------------------------------- the Tracker on a sqlite store


def test_tracker_logs_params_metrics_tags_and_artifacts(store: str, client: Any, tmp_path: Path) -> None:
    cfg = make_cfg(store)
    samples = [
        {"prompt": "P: fen1", "completion": "M: e2e4", "reward": 0.5, "truth": {"best": "e2e4"}},
        {"prompt": "P: fen2", "completion": "M: ???", "reward": 0.0, "truth": {"best": "d2d4"}},
    ]
    with make_tracker(cfg) as tracker:
        tracker.log_params(cfg)
        tracker.log_config_yaml(cfg)
        for step in range(5):
            tracker.log_metrics({"reward": step / 10, "reward/P/format": 1.0, "kl@bad": step}, step=step)
        tracker.log_samples(samples, step=10)
        tracker.log_dict({"eval/score": 0.42}, "eval_final.json")
        run_id = tracker.run_id
    run = client.get_run(run_id)
    params = run.data.params
    assert params["seed"] == "7" and params["model.n_layer"] == "2"
    assert params["grpo.epsilons"] == "[0.2, 0.28]" and params["tracking.backend"] == "mlflow"
    assert len(params["notes"]) == 500 and params["notes"].endswith("...")
    expected_commit = r"[0-9a-f]{40}" if (REPO / ".git").exists() else "unknown"
    assert re.fullmatch(expected_commit, params["git.commit"])
    assert params["git.dirty"] in ("true", "false", "unknown")
    history = client.get_metric_history(run_id, "reward")
    assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [
        (s, s / 10) for s in range(5)
    ]
    assert run.data.metrics["reward/P/format"] == 1.0 and run.data.metrics["kl_bad"] == 4.0
    assert run.data.tags[OUTCOME_TAG] == "success" and STOP_REASON_TAG not in run.data.tags
    assert run.info.status == "FINISHED"
    config_text = Path(client.download_artifacts(run_id, "config.yaml", str(tmp_path))).read_text()
    assert OmegaConf.create(config_text) == OmegaConf.create(OmegaConf.to_yaml(cfg, resolve=True))
    table = download_json(client, run_id, "samples/step_000010.json", tmp_path)
    assert table["columns"] == ["prompt", "completion", "reward", "truth"]
    assert table["data"][0][:3] == ["P: fen1", "M: e2e4", 0.5]
    assert json.loads(table["data"][1][3]) == {"best": "d2d4"}
    assert download_json(client, run_id, "eval_final.json", tmp_path) == {"eval/score": 0.42}


def test_body_exception_ends_the_run_failed_with_its_message(store: str, client: Any) -> None:
    tracker = make_tracker(make_cfg(store))
    with pytest.raises(RuntimeError, match="loss is nan"):
        with tracker:
            tracker.log_metrics({"reward": 0.1}, step=0)
            tracker.set_outcome("running")
            raise RuntimeError("loss is nan\nat step 3")
    run = client.get_run(tracker.run_id)
    assert run.data.tags[OUTCOME_TAG] == "failed"
    assert run.data.tags[STOP_REASON_TAG] == "RuntimeError: loss is nan at step 3"
    assert run.info.status == "FAILED"
    assert run.data.metrics["reward"] == 0.1  # buffered metrics were still written


@pytest.mark.parametrize(("outcome", "status"),
                         [("kl_failure", "FAILED"), ("diverged:kl_growth", "FAILED"), ("pruned", "KILLED")])
@pytest.mark.slow
def test_set_outcome_is_the_final_tag(store: str, client: Any, outcome: str, status: str) -> None:
    with make_tracker(make_cfg(store)) as tracker:
        tracker.log_metrics({"kl": 3.2}, step=4)
        tracker.set_outcome(outcome, f"{outcome} at step 4")
    run = client.get_run(tracker.run_id)
    assert run.data.tags[OUTCOME_TAG] == outcome
    assert run.data.tags[STOP_REASON_TAG] == f"{outcome} at step 4"
    assert run.info.status == status


def test_metric_write_error_is_raised_not_swallowed(store: str, client: Any) -> None:
    tracker = make_tracker(make_cfg(store, flush_interval_s=60))
    with pytest.raises(TrackingError, match="metric writer failed"):
        with tracker:
            tracker.log_metrics({"reward": 1.0}, step=2**70)  # too large for the store's integer
            tracker.set_outcome("success")
    assert client.get_run(tracker.run_id).data.tags[OUTCOME_TAG] == "success"  # still final


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_server_fails_at_start_in_one_line() -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    start = time.perf_counter()
    with pytest.raises(TrackingError) as raised:
        with make_tracker(make_cfg(uri, connect_timeout_s=2)):
            pytest.fail("the run must not start")
    print(f"unreachable server reported after {time.perf_counter() - start:.2f} s")
    message = str(raised.value)
    assert f"MLflow tracking server {uri} unreachable" in message and "tracking=none" in message
    assert "\n" not in message


def test_tracking_bench_reports_the_hot_path_and_the_overhead_target(capsys: pytest.CaptureFixture[str]) -> None:
    """Structure only: the overhead target is measured by `python -m rookworld.bench.tracking_overhead --step-ms 100`."""
    from rookworld.bench.tracking_overhead import TARGET_PERCENT, main

    main(["--steps", "40", "--sync-steps", "3", "--step-ms", "2"])
    out = capsys.readouterr().out
    print(out)
    assert re.search(r"calling thread: mean [\d.]+ ms, p50 [\d.]+ ms, p99 [\d.]+ ms", out), out
    assert re.search(r"writer subprocess: \d+ batches, 1200 metrics", out), out  # 40 steps x 30 metrics
    assert "against a 2 ms step" in out and f"target <= {TARGET_PERCENT:g} %" in out


def test_tracking_bench_rejects_a_step_count_below_one(capsys: pytest.CaptureFixture[str]) -> None:
    from rookworld.bench.tracking_overhead import main

    for option in ("--steps", "--sync-steps"):
        with pytest.raises(SystemExit) as exited:
            main([option, "0"])
        assert exited.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: {option} 0: must be >= 1")


# ---------------------------------------------------------------- a real Hydra multirun

APP = """
import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from rookworld.app.hooks import run_link
from rookworld.tracking import make_tracker

OUTCOMES = ["success", "kl_failure", "success", "raise"]


@hydra.main(config_path="conf", config_name="app", execution_whitelist="rookworld.*")
def main(cfg: DictConfig) -> float:
    kind = OUTCOMES[HydraConfig.get().job.num]
    with make_tracker(cfg, run_link(cfg)) as tracker:  # tracking.run_link: conf/tracking/mlflow.yaml
        tracker.log_params(cfg)
        for step in range(3):
            tracker.log_metrics({"reward": cfg.lr * step}, step=step)
        if kind == "raise":
            raise RuntimeError(f"boom in job {HydraConfig.get().job.num}")
        objective = cfg.lr * 10 if kind == "success" else -1.0
        tracker.log_metrics({"objective": objective}, step=3)
        tracker.set_outcome(kind, "" if kind == "success" else "kl above max")
        return objective


if __name__ == "__main__":
    main()
"""

APP_CONFIG = """
defaults:
  - tracking: mlflow
  - _self_
hydra:
  searchpath:
    - file://{conf}
seed: 0
lr: 0.1
"""


@pytest.mark.slow
def test_multirun_children_attach_to_one_parent_with_a_summary(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from rookworld.sweep.report.summary import summarise_children

    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "app.yaml").write_text(APP_CONFIG.format(conf=REPO / "conf"))
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    command = [sys.executable, "app.py", "-m", "lr=0.1,0.2,0.3,0.4", "hydra/launcher=joblib",
               "hydra.launcher.n_jobs=2", "hydra.sweep.dir=multirun/test"]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "boom in job 3" in result.stderr  # Hydra fails the multirun
    assert "Creating initial MLflow database tables" not in output, output  # rookworld quiets the store's creation
    for problem in ("database is locked", "OperationalError", "IntegrityError", "Callback "):
        assert problem not in output, output

    parent_ref = json.loads((tmp_path / "multirun" / "test" / PARENT_RUN_FILE).read_text())
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rookworld")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if PARENT_TAG not in r.data.tags]
    children = [r for r in runs if PARENT_TAG in r.data.tags]
    assert [p.info.run_id for p in parents] == [parent_ref["run_id"]]
    parent = parents[0]
    assert {c.data.tags[PARENT_TAG] for c in children} == {parent.info.run_id}
    outcomes = {int(c.data.tags[TRIAL_TAG]): c.data.tags[OUTCOME_TAG] for c in children}
    assert outcomes == {0: "success", 1: "kl_failure", 2: "success", 3: "failed"}
    failed = next(c for c in children if c.data.tags[TRIAL_TAG] == "3")
    assert failed.data.tags[STOP_REASON_TAG] == "RuntimeError: boom in job 3"
    assert {c.data.tags[STUDY_TAG] for c in children} == {"multirun/test"}
    assert parent.data.tags[STUDY_TAG] == "multirun/test"

    assert parent.info.status == "FINISHED"
    metrics = parent.data.metrics
    assert (metrics["sweep.n_trials"], metrics["sweep.n_success"]) == (4, 2)
    assert (metrics["sweep.n_kl_failure"], metrics["sweep.n_failed"]) == (1, 1)
    assert metrics["sweep.best_objective"] == pytest.approx(3.0)
    assert parent.data.tags["sweep.best_trial"] == "2" and parent.data.tags["sweep.best.lr"] == "0.3"
    artifacts = {Path(a.path).name for a in client.list_artifacts(parent.info.run_id, "sweep_summary")}
    assert artifacts == SUMMARY_FILES
    assert "# Sweep multirun/test" in result.stdout and "| 3 | failed |" in result.stdout

    lowest = summarise_children(client, parent.info.run_id, direction="minimize").best
    assert lowest is not None and lowest.trial == 0  # the lowest success: a kl_failure (-1.0) is never best


# ---------------------------------------------------------------- a real MLflow server


def rest(base: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def wait_ready(base: str, process: subprocess.Popen[bytes], log_file: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, log_file.read_text()
        try:
            with urllib.request.urlopen(base + "/health", timeout=1):
                return
        except OSError:
            time.sleep(0.25)
    pytest.fail(f"mlflow server not ready after {timeout_s} s:\n{log_file.read_text()}")


def stop_process_group(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(timeout=20)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)
    pytest.fail("mlflow server workers outlived SIGTERM")


@contextlib.contextmanager
def mlflow_server(store: str, cwd: Path, timeout_s: float = 60) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`mlflow server` over `store` on a free 127.0.0.1 port, in its own process group (stopped on exit);
    yields its address and process."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_file = cwd / "server.log"
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with log_file.open("wb") as sink:
        process = subprocess.Popen(
            ["mlflow", "server", "--backend-store-uri", store, "--host", "127.0.0.1",
             "--port", str(port), "--workers", "1"],
            cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        wait_ready(base, process, log_file, timeout_s=timeout_s)
        yield base, process
    finally:
        stop_process_group(process)


def tags_of(run: dict[str, Any]) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["data"].get("tags", [])}


@pytest.mark.slow
def test_mlflow_server_serves_runs_and_outcomes(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    for outcome in ("success", "kl_failure"):
        with make_tracker(make_cfg(store)) as tracker:
            tracker.log_metrics({"reward": 0.5}, step=1)
            tracker.set_outcome(outcome)
    with mlflow_server(store, tmp_path) as (base, server):
        with make_tracker(make_cfg(base)) as remote:  # the same Tracker over http
            remote.log_metrics({"reward": 0.9}, step=1)
            remote.set_outcome("pruned", "below median")
        experiment = rest(base, "/api/2.0/mlflow/experiments/get-by-name?experiment_name=tests")
        found = rest(base, "/api/2.0/mlflow/runs/search",
                     {"experiment_ids": [experiment["experiment"]["experiment_id"]]})["runs"]
        outcomes = sorted(tags_of(r)[OUTCOME_TAG] for r in found)
        assert outcomes == ["kl_failure", "pruned", "success"]
        by_id = {r["info"]["run_id"]: r for r in found}
        assert by_id[remote.run_id]["info"]["status"] == "KILLED"
        assert {m["key"]: m["value"] for m in by_id[remote.run_id]["data"]["metrics"]} == {"reward": 0.9}
    assert server.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(server.pid, 0)
