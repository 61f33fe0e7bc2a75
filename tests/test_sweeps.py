"""Optuna sweeps: configs, the pruning bridge, stale trials, GPU slots, and real sweeps end to end.

The end-to-end tests run real Hydra multiruns in subprocesses: a small `rookworld.train` smoke sweep
(the real model and trainer), and a fast stand-in app (the real sweeper, hook, storage and MLflow
tracker around a sleep loop) for the kill-and-resume and parallel-jobs tests.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from optuna.trial import TrialState

import rookworld.config  # noqa: F401  (registers the ${rookworld.asset:} resolver)
from rookworld.config import ConfigError
from rookworld.sweep.gpus import claim_slot
from rookworld.sweep.pruning import OptunaPruningHook, build_pruner
from rookworld.sweep.study import (
    FAIL_REASON_ATTR,
    OWNER_ATTR,
    RETRY_OF_ATTR,
    STALE_ATTR,
    TRIAL_NUMBER_PARAM,
    Heartbeat,
    add_trial_number,
    finished_count,
    open_storage,
    resolve_stale_trials,
    trial_id,
)
from rookworld.tracking import (
    OUTCOME_TAG,
    PARENT_TAG,
    ROLE_TAG,
    STOP_REASON_TAG,
    STUDY_TAG,
    TRIAL_TAG,
)

REPO = Path(__file__).resolve().parents[1]
CONF_DIR = str(REPO / "conf")
optuna.logging.set_verbosity(optuna.logging.WARNING)


def compose_sweep(*overrides: str) -> Any:
    with initialize_config_dir(config_dir=CONF_DIR):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "CUDA_VISIBLE_DEVICES")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return {**env, **extra}


# ---------------------------------------------------------------- configs


@pytest.mark.parametrize("sweep", ["smoke", "kl_stability"])
@pytest.mark.parametrize(("storage", "prefix"), [("sqlite", "sqlite:///outputs/optuna/"),
                                                 ("journal", "journal:outputs/optuna/"),
                                                 ("postgresql", "postgresql://")])
def test_sweeps_compose_with_every_storage(sweep: str, storage: str, prefix: str) -> None:
    cfg = compose_sweep(f"sweeps={sweep}", f"sweep_storage={storage}")
    sweeper = cfg.hydra.sweeper
    assert sweeper._target_ == "rookworld.sweep.sweeper.RookworldOptunaSweeper"
    assert sweeper.study_name == sweep and sweeper.direction == "maximize"
    assert str(sweeper.storage).startswith(prefix)
    assert cfg.trial.number is None and cfg.trial.metric == "eval/score"
    assert cfg.hydra.launcher._target_.endswith("JoblibLauncher")
    assert cfg.hydra.launcher.n_jobs == sweeper.n_jobs
    assert sweeper.sampler._target_ == "optuna.samplers.TPESampler" and sweeper.sampler.seed == 0
    assert "optimizer.lr" in sweeper.params


def test_smoke_runs_the_tiny_model_on_the_cpu_and_kl_stability_the_real_one() -> None:
    smoke, real = compose_sweep("sweeps=smoke"), compose_sweep("sweeps=kl_stability")
    assert smoke.device == "cpu" and "rookworld_tiny" in smoke.model.source
    assert smoke.hydra.sweeper.n_trials >= 12
    assert smoke.hydra.sweeper.params["optimizer.lr"] == "tag(log, interval(1e-6, 1.0))"
    assert real.model.source == "jrahn/RookWorld-LM-124M" and real.device == "auto"
    searched = set(real.hydra.sweeper.params)
    assert {"optimizer.lr", "kl.coef", "kl.estimator", "grpo.epsilon_low", "grpo.epsilon_high", "kl.warmup_steps",
            "kl.warmup_factor", "sampling.temperature", "task_mix", "grpo.group_size"} <= searched


def test_slurm_launcher_composes() -> None:
    cfg = compose_sweep("sweeps=kl_stability", "hydra/launcher=slurm", "sweep_storage=postgresql")
    launcher = cfg.hydra.launcher
    assert launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert launcher.gpus_per_node == 1 and launcher.array_parallelism == cfg.hydra.sweeper.n_jobs


@pytest.mark.parametrize(("pruner", "kind"), [("median", optuna.pruners.MedianPruner),
                                              ("percentile", optuna.pruners.PercentilePruner),
                                              ("hyperband", optuna.pruners.HyperbandPruner),
                                              ("threshold", optuna.pruners.ThresholdPruner),
                                              ("none", optuna.pruners.NopPruner)])
def test_every_pruner_config_builds_its_pruner(pruner: str, kind: type) -> None:
    cfg = compose_sweep("trial=optuna", f"trial/pruner={pruner}")
    assert isinstance(build_pruner(cfg.trial.pruner), kind)


def test_bad_pruner_configs_fail_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"trial.pruner.kind='fastest': expected one of none, median"):
        build_pruner(OmegaConf.create({"kind": "fastest"}))
    with pytest.raises(ConfigError, match="trial.pruner=.*unexpected keyword argument 'patience'"):
        build_pruner(OmegaConf.create({"kind": "median", "patience": 3}))


# ---------------------------------------------------------------- the pruning hook


def make_study(tmp_path: Path, name: str = "unit") -> tuple[optuna.Study, optuna.storages.BaseStorage, str]:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    storage = open_storage(url, str(tmp_path))
    return optuna.create_study(study_name=name, storage=storage, direction="maximize"), storage, url


def ask_numbered(study: optuna.Study, **params: float) -> optuna.trial.Trial:
    """A trial as rookworld's sweeper asks it: its own number as a param, then the swept params."""
    trial = study.ask()
    add_trial_number(trial)
    for name, value in params.items():
        trial.suggest_float(name, value, value)
    return trial


def hook_config(url: str, number: int, pruner: dict[str, Any], **trial: Any) -> Any:
    return OmegaConf.create({"trial": {"number": number, "study": "unit", "storage": url, "metric": "score",
                                       "every": 1, "window": 1, "pruner": pruner, **trial}})


def test_hook_reports_to_its_trial_and_ends_it_pruned(tmp_path: Path) -> None:
    study, _, url = make_study(tmp_path)
    for value in (0.8, 0.9):
        done = ask_numbered(study)
        done.report(value, 2)
        study.tell(done, value)
    running = ask_numbered(study)
    hook = OptunaPruningHook.from_config(hook_config(url, running.number, {"kind": "median", "n_startup_trials": 2}))
    assert not hook.should_prune(1, {"loss": 0.3})  # no metric, nothing reported
    assert hook.should_prune(2, {"score": 0.1})     # below the median at step 2
    trial = study.trials[running.number]
    assert trial.state == TrialState.PRUNED and trial.intermediate_values == {2: 0.1}
    study.tell(running.number, 0.1, skip_if_finished=True)  # what the sweeper's tell then does
    assert study.trials[running.number].state == TrialState.PRUNED


def test_hook_window_and_every(tmp_path: Path) -> None:
    study, _, url = make_study(tmp_path)
    running = ask_numbered(study)
    hook = OptunaPruningHook.from_config(hook_config(url, running.number, {"kind": "none"}, every=2, window=2))
    for step, value in enumerate([1.0, 3.0, 5.0, 7.0], start=1):
        assert not hook.should_prune(step, {"score": value})
    assert study.trials[0].intermediate_values == {2: 2.0, 4: 6.0}


def test_hook_refuses_a_trial_not_running_and_bad_settings(tmp_path: Path) -> None:
    study, _, url = make_study(tmp_path)
    failed = ask_numbered(study)
    study.tell(failed, state=TrialState.FAIL)
    with pytest.raises(RuntimeError, match="Optuna trial 0 of study 'unit' is FAIL, not RUNNING"):
        OptunaPruningHook.from_config(hook_config(url, 0, {"kind": "none"}))
    orphan = OptunaPruningHook.from_config(hook_config(url, ask_numbered(study).number, {"kind": "none"}))
    study.tell(orphan.trial, state=TrialState.FAIL)  # a newer sweep failed it as stale
    with pytest.raises(RuntimeError, match="Optuna trial 1 of study 'unit' is FAIL, not RUNNING"):
        orphan.should_prune(1, {"loss": 0.1})
    with pytest.raises(ConfigError, match="trial.every=0: must be an integer >= 1"):
        OptunaPruningHook.from_config(hook_config(url, 0, {"kind": "none"}, every=0))
    bare = hook_config(url, 0, {"kind": "none"}, study=None)
    with pytest.raises(ConfigError, match="no Optuna study: run inside an Optuna sweep"):
        OptunaPruningHook.from_config(bare)


# ---------------------------------------------------------------- stale trials


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def stamp(storage: Any, study: optuna.Study, number: int, host: str, pid: int, age_s: float) -> None:
    owner = {"host": host, "pid": pid, "heartbeat": time.time() - age_s}
    storage.set_trial_system_attr(trial_id(storage, study.study_name, number), OWNER_ATTR, owner)


def test_stale_trials_are_failed_and_requeued_live_ones_kept(tmp_path: Path) -> None:
    import socket

    study, storage, _ = make_study(tmp_path)
    host = socket.gethostname()
    finished = ask_numbered(study, x=0.1)
    study.tell(finished, 0.5)
    killed = ask_numbered(study, x=0.2)          # its sweeper process is gone
    silent = ask_numbered(study, x=0.3)          # another host, no heartbeat for 10 min
    alive = ask_numbered(study, x=0.4)           # a live sweeper (our parent), fresh heartbeat
    retried_before = ask_numbered(study, x=0.5)  # stale, but already a retry
    stamp(storage, study, killed.number, host, dead_pid(), age_s=1)
    stamp(storage, study, silent.number, "elsewhere", 1, age_s=600)
    stamp(storage, study, alive.number, host, os.getppid(), age_s=1)
    stamp(storage, study, retried_before.number, host, dead_pid(), age_s=1)
    storage.set_trial_user_attr(trial_id(storage, "unit", retried_before.number), "rookworld:retries", 1)

    stale = resolve_stale_trials(study, storage, grace_s=300, retries=1)

    assert [(s.number, s.retried) for s in stale] == [(1, True), (2, True), (4, False)]
    trials = study.trials
    assert [t.state for t in trials[:5]] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.FAIL,
                                             TrialState.RUNNING, TrialState.FAIL]
    assert trials[1].user_attrs[FAIL_REASON_ATTR].startswith("stale: its sweeper process") and \
        trials[1].system_attrs[STALE_ATTR]
    assert "no heartbeat from its sweeper elsewhere:1" in trials[2].user_attrs[FAIL_REASON_ATTR]
    queued = study.get_trials(states=(TrialState.WAITING,))
    assert [(t.user_attrs[RETRY_OF_ATTR], t.system_attrs["fixed_params"]) for t in queued] == \
        [(1, {"x": 0.2}), (2, {"x": 0.3})]
    assert finished_count(study) == 1  # stale failures did not run to their end


def test_heartbeat_stamps_running_trials_until_they_finish(tmp_path: Path) -> None:
    study, storage, _ = make_study(tmp_path)
    running, pruned = ask_numbered(study), ask_numbered(study)
    heartbeat = Heartbeat(storage, interval_s=60)
    for trial in (running, pruned):
        heartbeat.own(trial_id(storage, "unit", trial.number))
    first = study.trials[running.number].system_attrs[OWNER_ATTR]
    assert first["pid"] == os.getpid()
    study.tell(pruned, state=TrialState.PRUNED)  # as its job does
    time.sleep(0.01)
    heartbeat.beat()
    beaten = study.trials[running.number].system_attrs[OWNER_ATTR]["heartbeat"]
    assert beaten > first["heartbeat"]

    def stamp() -> float:
        return study.trials[running.number].system_attrs[OWNER_ATTR]["heartbeat"]

    live = Heartbeat(storage, interval_s=0.05)
    live.own(trial_id(storage, "unit", running.number))
    owned_at = stamp()
    with live:  # its thread stamps the running trial again and again, unasked
        deadline = time.monotonic() + 5  # liveness, not speed: ~100 beats are due by then
        while stamp() <= owned_at:
            assert time.monotonic() < deadline, "the heartbeat thread never stamped the running trial"
            time.sleep(0.02)
    stopped = stamp()
    time.sleep(0.2)  # four intervals: a thread still running would stamp again
    assert stamp() == stopped  # the thread was joined on exit


def test_a_storage_that_cannot_be_opened_fails_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rookworld.sweep.summarise import main as summarise
    from rookworld.sweep.sweeper import RookworldOptunaSweeper

    # a URL that is no URL; a database without its driver here (or, with one, without a server)
    for url, reason in (("foo", "Could not parse SQLAlchemy URL"), ("mysql://u@localhost:1/optuna", "")):
        with pytest.raises(ConfigError, match=f"^hydra.sweeper.storage='{url}': cannot open the Optuna storage .*{reason}"):
            RookworldOptunaSweeper(sampler=OmegaConf.create({}), direction="maximize", storage=url, study_name="s",
                                   n_trials=1, n_jobs=1, max_failure_rate=0.0, custom_search_space=None, params=None,
                                   stale_retries=1, heartbeat_interval_s=30, grace_period_s=300)
        assert summarise(["--study", "s", "--storage", url]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"rookworld: error: cannot open Optuna storage {url} (") and reason in err
        assert err.count("\n") == 1


def test_gpu_slots_are_exclusive_until_released(tmp_path: Path) -> None:
    first, held = claim_slot(tmp_path, 2)
    second, held_too = claim_slot(tmp_path, 2)
    assert (first, second) == (0, 1)
    with pytest.raises(RuntimeError, match="all 2 GPU slots of this sweep are held"):
        claim_slot(tmp_path, 2)
    held.close()  # a worker process exiting releases its slot
    again, _ = claim_slot(tmp_path, 2)
    assert again == 0
    held_too.close()


# ---------------------------------------------------------------- the real smoke sweep, smaller


def mlflow_runs(tmp_path: Path) -> tuple[Any, list[Any]]:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rookworld")
    return client, client.search_runs([experiment.experiment_id])


@pytest.mark.slow
def test_smoke_sweep_records_complete_guarded_and_pruned_trials(tmp_path: Path) -> None:
    """`sweeps=smoke` on 3 trials chosen to end three ways: success, kl_failure (guard), pruned."""
    command = [sys.executable, "-m", "rookworld.train", "-m", "sweeps=smoke", "hydra/sweeper/sampler=grid",
               "optimizer.lr=choice(1e-5,1e-3,1.0)", "kl.coef=choice(0.04)", "sampling.temperature=choice(1.0)",
               "trial/pruner=threshold", "trial.pruner.lower=0.2", "hydra.sweeper.n_trials=3"]
    start = time.monotonic()
    result = subprocess.run(command, cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True, timeout=420)
    elapsed = time.monotonic() - start
    assert result.returncode == 0, result.stderr[-4000:]
    print(f"smoke sweep of 3 trials: {elapsed:.0f} s")

    study = optuna.load_study(study_name="smoke", storage=f"sqlite:///{tmp_path / 'outputs/optuna/smoke.db'}")
    by_lr = {t.params["optimizer.lr"]: t for t in study.trials}
    assert sorted(by_lr) == [1e-5, 1e-3, 1.0] and all(t.params[TRIAL_NUMBER_PARAM] == t.number for t in study.trials)
    ok, pruned, diverged = by_lr[1e-5], by_lr[1e-3], by_lr[1.0]
    assert ok.state == TrialState.COMPLETE and ok.value > 0.2
    assert diverged.state == TrialState.COMPLETE and diverged.value == -1.0  # objective.failure_penalty
    assert pruned.state == TrialState.PRUNED and max(pruned.intermediate_values) == 3

    client, runs = mlflow_runs(tmp_path)
    parents = [r for r in runs if r.data.tags.get(ROLE_TAG) == "sweep_parent"]
    children = [r for r in runs if PARENT_TAG in r.data.tags]
    assert len(parents) == 1 and len(children) == 3
    assert {c.data.tags[PARENT_TAG] for c in children} == {parents[0].info.run_id}
    outcome = {int(c.data.tags[TRIAL_TAG]): c for c in children}
    assert outcome[ok.number].data.tags[OUTCOME_TAG] == "success"
    assert outcome[diverged.number].data.tags[OUTCOME_TAG] == "kl_failure"
    assert outcome[pruned.number].data.tags[OUTCOME_TAG] == "pruned"
    assert outcome[pruned.number].info.status == "KILLED"
    steps = [m.step for m in client.get_metric_history(outcome[pruned.number].info.run_id, "reward")]
    assert max(steps) == 3 < 6  # stopped at its first evaluation, out of 6 steps

    parent = client.get_run(parents[0].info.run_id)
    assert (parent.data.metrics["sweep.optuna.n_complete"], parent.data.metrics["sweep.optuna.n_pruned"]) == (2, 1)
    assert parent.data.tags["sweep.optuna.best_trial"] == str(ok.number)
    assert "# Optuna study smoke" in result.stdout and "| PRUNED | - | pruned | 3 |" in result.stdout

    summary = subprocess.run([sys.executable, "-m", "rookworld.sweep.summarise", "--study", "smoke"], cwd=tmp_path,
                             env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert summary.returncode == 0, summary.stderr
    assert "Optuna states: COMPLETE 2, PRUNED 1; MLflow outcomes: kl_failure 1, pruned 1, success 1" in summary.stdout


# ---------------------------------------------------------------- a stand-in app: kill, resume, parallel

APP = """
import os
import time

import hydra
from omegaconf import DictConfig

from rookworld.sweep.gpus import assign_gpu
from rookworld.sweep.context import trial_link
from rookworld.sweep.pruning import OptunaPruningHook
from rookworld.tracking import make_tracker


@hydra.main(config_path="conf", config_name="app", execution_whitelist="rookworld.*")
def main(cfg: DictConfig) -> float:
    gpu = assign_gpu(cfg)
    hook = OptunaPruningHook.from_config(cfg)
    with make_tracker(cfg, trial_link(cfg)) as tracker:
        hook.trial.set_user_attr("job", {"pid": os.getpid(), "gpu": gpu, "start": time.time()})
        if cfg.trial.number == cfg.fail_trial:
            raise RuntimeError(f"boom in trial {cfg.trial.number}")
        for step in range(1, cfg.steps + 1):
            time.sleep(cfg.step_s)
            metrics = {"score": cfg.x * step}
            tracker.log_metrics(metrics, step)
            if hook.should_prune(step, metrics):
                tracker.set_outcome("pruned", f"pruned at step {step}")
                return cfg.x * step
        tracker.log_metrics({"objective": cfg.x * cfg.steps}, cfg.steps)
    hook.trial.set_user_attr("end", time.time())
    return cfg.x * cfg.steps


if __name__ == "__main__":
    main()
"""

APP_CONFIG = """
defaults:
  - trial: optuna
  - tracking: mlflow
  - sweep_storage: sqlite
  - override hydra/sweeper: rookworld_optuna
  - _self_
hydra:
  searchpath:
    - file://{conf}
  sweep:
    dir: multirun/sweep
    subdir: trial_${{trial.number}}
  sweeper:
    study_name: fake
    n_trials: 6
    sampler:
      seed: 0
    params:
      x: interval(0.0, 1.0)
seed: 0
device: auto
x: 0.5
steps: 4
step_s: 0.3
fail_trial: -1
trial:
  metric: score
  pruner:
    n_startup_trials: 2
"""


def write_app(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "app.yaml").write_text(APP_CONFIG.format(conf=CONF_DIR))


def fake_study(tmp_path: Path) -> optuna.Study:
    return optuna.load_study(study_name="fake", storage=f"sqlite:///{tmp_path / 'outputs/optuna/fake.db'}")


def study_created(db: Path) -> bool:
    """Read-only: opening a half-created sqlite study through Optuna would race the sweeper's schema setup."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            return conn.execute("SELECT COUNT(*) FROM studies WHERE study_name = 'fake'").fetchone()[0] == 1
    except sqlite3.OperationalError:  # no file or no tables yet
        return False


def wait_for_a_running_job(tmp_path: Path, process: subprocess.Popen[bytes], finished: int, timeout_s: float) -> None:
    """Until `finished` trials are finished and the next one's job is in its MLflow run (its first step sleeps)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
        if study_created(tmp_path / "outputs/optuna/fake.db"):
            trials = fake_study(tmp_path).trials
            done = sum(t.state.is_finished() for t in trials)
            if done >= finished and any(t.state == TrialState.RUNNING and "job" in t.user_attrs for t in trials):
                return
        time.sleep(0.05)
    pytest.fail(f"no job running after {finished} finished trials within {timeout_s} s")


@pytest.mark.slow
def test_killed_sweep_resumes_without_losing_or_repeating_trials(tmp_path: Path) -> None:
    write_app(tmp_path)
    command = [sys.executable, "app.py", "-m", "step_s=0.6"]
    with open(tmp_path / "first.log", "wb") as log:
        first = subprocess.Popen(command, cwd=tmp_path, env=subprocess_env(), stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        wait_for_a_running_job(tmp_path, first, finished=2, timeout_s=120)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    before = fake_study(tmp_path).trials
    killed = [t.number for t in before if t.state == TrialState.RUNNING]
    kept = {t.number: (t.state, t.params, t.value, t.intermediate_values) for t in before if t.state.is_finished()}
    assert len(killed) == 1 and len(kept) >= 2

    second = subprocess.run(command, cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True, timeout=180)
    assert second.returncode == 0, second.stderr[-4000:]

    study = fake_study(tmp_path)
    after = study.trials
    assert {n: (after[n].state, after[n].params, after[n].value, after[n].intermediate_values) for n in kept} == kept
    stale = after[killed[0]]
    assert stale.state == TrialState.FAIL and stale.system_attrs[STALE_ATTR]
    assert stale.user_attrs[FAIL_REASON_ATTR].startswith("stale: its sweeper process")
    retries = [t for t in after if t.user_attrs.get(RETRY_OF_ATTR) == stale.number]
    assert len(retries) == 1 and retries[0].state.is_finished()
    assert retries[0].params["x"] == stale.params["x"]
    assert finished_count(study) == 6 and not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    assert len({t.params["x"] for t in after}) == len(after) - 1  # only the retry repeats params: its stale trial's
    assert {t.state for t in after} <= {TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL}

    client, runs = mlflow_runs(tmp_path)
    trial_runs = [r for r in runs if r.data.tags.get(ROLE_TAG) == "trial"]
    per_trial = {n: [r for r in trial_runs if r.data.tags[TRIAL_TAG] == str(n)] for n in range(len(after))}
    assert all(len(per_trial[n]) == 1 for n in kept)  # no finished trial ran again
    killed_run = per_trial[stale.number][0]
    assert killed_run.data.tags[OUTCOME_TAG] == "failed" and killed_run.info.status == "KILLED"
    assert killed_run.data.tags[STOP_REASON_TAG].startswith("sweep stopped while it ran")
    assert {r.data.tags[STUDY_TAG] for r in trial_runs} == {"fake"}


@pytest.mark.slow
def test_parallel_jobs_each_report_to_their_own_trial(tmp_path: Path) -> None:
    write_app(tmp_path)
    command = [sys.executable, "app.py", "-m", "hydra/launcher=parallel", "hydra.sweeper.n_jobs=2",
               "hydra.sweeper.n_trials=4", "hydra.sweeper.max_failure_rate=0.5", "tracking=none",
               "trial.pruner.n_startup_trials=100", "fail_trial=2", "step_s=0.5"]
    result = subprocess.run(command, cwd=tmp_path, env=subprocess_env(CUDA_VISIBLE_DEVICES="0,1"),
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-4000:]

    trials = fake_study(tmp_path).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]
    assert trials[2].user_attrs[FAIL_REASON_ATTR] == "RuntimeError: boom in trial 2"
    for t in (trials[0], trials[1], trials[3]):
        x = t.params["x"]
        assert t.intermediate_values == pytest.approx({s: x * s for s in range(1, 5)})  # its own job's values
        assert t.value == pytest.approx(4 * x)
    first, second = trials[0].user_attrs, trials[1].user_attrs
    assert first["job"]["start"] < second["end"] and second["job"]["start"] < first["end"]  # ran at once
    jobs = [t.user_attrs["job"] for t in trials]
    gpu_of = {job["pid"]: job["gpu"] for job in jobs}
    assert len(gpu_of) == 2 and sorted(gpu_of.values()) == ["0", "1"]  # a GPU per worker process
    assert all(gpu_of[job["pid"]] == job["gpu"] for job in jobs)     # kept across its trials
