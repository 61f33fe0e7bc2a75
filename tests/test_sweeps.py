"""Optuna sweeps: configs, the pruning bridge, stale trials, GPU pinning, summaries; real sweeps end to end.

The end-to-end tests (tests/test_sweep_workers.py) run real `rookworld.train` sweeps in subprocesses.
"""

from __future__ import annotations

import os
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

import rookworld.app.config  # noqa: F401  (registers the ${rookworld.asset:} resolver)
from rookworld.specs.rules import ConfigError
from rookworld.sweep.running.gpus import worker_gpus
from rookworld.sweep.storage.clock import StorageClock
from rookworld.sweep.storage.host import host_id
from rookworld.sweep.job.pruning import OptunaPruningHook, build_pruner
from rookworld.sweep.storage.storage_url import default_timeouts
from rookworld.sweep.staged.stages import RACE, SEARCH
from rookworld.sweep.report.summary import RUNS, STUDY, SweepSummary, TrialRow, summary_dict, summary_markdown
from rookworld.sweep.storage.study import (
    FAIL_REASON_ATTR,
    OWNER_ATTR,
    RETRY_OF_ATTR,
    STALE_ATTR,
    Heartbeat,
    finished_count,
    open_storage,
    resolve_stale_trials,
    trial_id,
)

REPO = Path(__file__).resolve().parents[1]
CONF_DIR = str(REPO / "conf")
optuna.logging.set_verbosity(optuna.logging.WARNING)


def compose_sweep(*overrides: str) -> Any:
    with initialize_config_dir(config_dir=CONF_DIR):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


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
    assert sweeper.validate == "rookworld.app.config.validate"
    assert sweeper.sampler._target_ == "optuna.samplers.TPESampler" and sweeper.sampler.seed == 0
    assert "optimizer.lr" in sweeper.params


def test_smoke_runs_the_tiny_model_on_the_cpu_and_kl_stability_the_real_one() -> None:
    smoke, real = compose_sweep("sweeps=smoke"), compose_sweep("sweeps=kl_stability")
    assert smoke.device == "cpu" and "rookworld_tiny" in smoke.model.source
    assert smoke.hydra.sweeper.n_trials >= 12
    assert smoke.hydra.sweeper.params["optimizer.lr"] == "tag(log, interval(1e-4, 1.2e-3))"
    assert real.model.source == "jrahn/RookWorld-LM-124M" and real.device == "auto"
    searched = set(real.hydra.sweeper.params)
    assert {"optimizer.lr", "kl.coef", "kl.estimator", "kl.warmup_steps", "kl.warmup_factor", "sampling.temperature",
            "task_mix", "grpo.group_size"} <= searched
    recipe = compose_sweep("sweeps=recipe_search").hydra.sweeper.params
    assert {"grpo.dynamic_sampling.enabled", "grpo.reward_aggregation", "grpo.entropy.coef", "grpo.top_entropy_quantile",
            "grpo.mask_truncated_completions", "grpo.sampler_correction.mode"} <= set(recipe)
    for sweep in ("recipe_search", "verdict"):  # kl.bias_correction=true is refused with k2: never crossed with it
        space = compose_sweep(f"sweeps={sweep}").hydra.sweeper.params
        assert "kl.bias_correction" not in space or "k2" not in str(space.get("kl.estimator", "k2")), sweep


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
    storage = open_storage(url, str(tmp_path), default_timeouts())
    return optuna.create_study(study_name=name, storage=storage, direction="maximize"), storage, url


def ask_numbered(study: optuna.Study, **params: float) -> optuna.trial.Trial:
    """A trial as a sweep worker asks it: the swept params (its job gets `trial.number=N` as an override)."""
    trial = study.ask()
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
    study, storage, url = make_study(tmp_path)
    host = host_id()
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

    stale = resolve_stale_trials(study, storage, grace_s=300, retries=1, clock=StorageClock(url, str(tmp_path)))

    assert [(s.number, s.retried) for s in stale] == [(1, True), (2, True), (4, False)]
    trials = study.trials
    assert [t.state for t in trials[:5]] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.FAIL,
                                             TrialState.RUNNING, TrialState.FAIL]
    assert trials[1].user_attrs[FAIL_REASON_ATTR].startswith("stale: its worker process") and \
        trials[1].system_attrs[STALE_ATTR]
    assert "no heartbeat from its worker elsewhere:1" in trials[2].user_attrs[FAIL_REASON_ATTR]
    queued = study.get_trials(states=(TrialState.WAITING,))
    assert [(t.user_attrs[RETRY_OF_ATTR], t.system_attrs["fixed_params"]) for t in queued] == \
        [(1, {"x": 0.2}), (2, {"x": 0.3})]
    assert finished_count(study) == 1  # stale failures did not run to their end


def test_heartbeat_stamps_running_trials_until_they_finish(tmp_path: Path) -> None:
    study, storage, url = make_study(tmp_path)
    clock = StorageClock(url, str(tmp_path))
    running, pruned = ask_numbered(study), ask_numbered(study)
    heartbeat = Heartbeat(storage, interval_s=60, clock=clock)
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

    live = Heartbeat(storage, interval_s=0.05, clock=clock)
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


# ---------------------------------------------------------------- storage, settings, GPUs


def test_a_missing_database_driver_is_named(tmp_path: Path) -> None:
    from rookworld.sweep.storage.study import MissingDriverError, open_storage

    with pytest.raises(MissingDriverError, match=r"the database driver module 'psycopg' is not installed"):
        open_storage("postgresql+psycopg://u@127.0.0.1:1/optuna", str(tmp_path), default_timeouts())


def test_summarise_rejects_a_bad_storage_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from rookworld.sweep.__main__ import main as sweep_command

    assert sweep_command(["summary", "--study", "s", "--storage", "foo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rookworld: error: cannot open Optuna storage foo (") and err.count("\n") == 1


def sweeper_args(**changes: Any) -> dict[str, Any]:
    base = {"sampler": OmegaConf.create({"_target_": "optuna.samplers.TPESampler", "seed": 0}),
            "direction": "maximize", "storage": "journal:x.journal", "study_name": "s", "n_trials": 4, "n_jobs": 2,
            "max_failure_rate": 0.0, "params": None, "stale_retries": 1, "heartbeat_interval_s": 30,
            "grace_period_s": 300, "validate": None, "max_worker_restarts": 4, "accept_fixed_changes": False,
            "connect_timeout_s": 10,
            "statement_timeout_s": 120, "lock_wait_s": 600, "lock_lease_s": 60, "stages": None}
    return {**base, **changes}


@pytest.mark.parametrize(("change", "message"), [
    ({"n_trials": "abc"}, "hydra.sweeper.n_trials='abc': expected an integer"),
    ({"n_jobs": 0}, "hydra.sweeper.n_jobs=0: must be an integer >= 1"),
    ({"max_failure_rate": 2}, "hydra.sweeper.max_failure_rate=2: must be a number in [0, 1]"),
    ({"direction": "up"}, "hydra.sweeper.direction='up': expected maximize or minimize"),
    ({"grace_period_s": 10}, "hydra.sweeper.grace_period_s=10: must be a number >= 2 x heartbeat_interval_s = 60"),
    ({"max_worker_restarts": -1}, "hydra.sweeper.max_worker_restarts=-1: must be an integer >= 0"),
    ({"lock_lease_s": 0}, "hydra.sweeper.lock_lease_s=0: must be a number > 0"),
    ({"accept_fixed_changes": "yes"}, "hydra.sweeper.accept_fixed_changes='yes': expected true or false"),
    ({"connect_timeout_s": "soon"}, "hydra.sweeper.connect_timeout_s='soon': expected a number"),
])
def test_sweeper_settings_are_checked(change: dict[str, Any], message: str) -> None:
    from rookworld.app.config import load_sweeper

    with pytest.raises(ConfigError) as error:
        load_sweeper(sweeper_args(**change))
    assert str(error.value) == message


def test_search_space_probes_touch_every_choice_and_both_ends() -> None:
    from rookworld.sweep.running.space import SearchSpace

    space = SearchSpace.parse({"optimizer.lr": "tag(log, interval(1e-6, 1e-4))", "task_mix": "choice(a, b, c)"},
                              ["sweeps=smoke", "steps=2"])
    assert space.fixed == ("sweeps=smoke", "steps=2") and space.log_scale() == ("optimizer.lr",)
    probes = space.probes()
    assert {p["task_mix"] for p in probes} == {"a", "b", "c"} and {p["optimizer.lr"] for p in probes} == {1e-6, 1e-4}
    with pytest.raises(ConfigError, match=r"^hydra.sweeper.params.x=interval\(1, : no viable alternative"):
        SearchSpace.parse({"x": "interval(1, "}, [])
    with pytest.raises(ConfigError, match=r"^optimizer.lr=interval\(1e-3,1e-5\): `low <= high` must hold"):
        SearchSpace.parse({"optimizer.lr": "tag(log, interval(1e-4, 1e-3))"}, ["optimizer.lr=interval(1e-3,1e-5)"])


def test_workers_are_pinned_to_gpus_round_robin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert worker_gpus(4, 2, "auto") == ["4", "5", "4", "5"]
    assert worker_gpus(3, 2, "cpu") == [None, None, None]
    with pytest.raises(ConfigError, match=r"hydra.sweeper.n_jobs=5: at most 4 workers: 2 GPUs x trial.trials_per_gpu=2"):
        worker_gpus(5, 2, "cuda")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert worker_gpus(2, 1, "auto") == [None, None]  # no GPU: CPU workers


# ---------------------------------------------------------------- summaries


def study_row(number: int, state: str, value: float | None, outcome: str) -> TrialRow:
    return TrialRow(number, outcome, value, {"optimizer.lr": 1.23456789e-5}, state=state)


def run_row(number: int, outcome: str, objective: float, **params: str) -> TrialRow:
    return TrialRow(number, outcome, objective, params, run_id=f"run{number}", status="FINISHED")


def test_the_best_trial_is_never_pruned_or_diverged() -> None:
    rows = (study_row(0, "PRUNED", None, "pruned"), study_row(1, "COMPLETE", -1.0, "kl_failure"),
            study_row(2, "COMPLETE", 0.3, "success"))
    study = SweepSummary(STUDY, "s", "maximize", rows, ("optimizer.lr",))
    assert study.best is not None and study.best.trial == 2
    diverged = SweepSummary(STUDY, "s", "maximize", rows[:2], ("optimizer.lr",))
    assert diverged.best is None and "Best: none" in summary_markdown(diverged)

    children = SweepSummary(RUNS, "s", "maximize", (run_row(0, "pruned", 0.9, **{"optimizer.lr": "1.23456789e-05"}),
                                                    run_row(1, "success", 0.2, **{"optimizer.lr": "1.23456789e-05"})),
                            ("optimizer.lr",), parent_run_id="p")
    assert children.best is not None and children.best.trial == 1  # the pruned run's higher score does not count
    assert "optimizer.lr=1.235e-05" in summary_markdown(children)
    assert SweepSummary(RUNS, "s", "maximize", children.trials[:1], ()).best is None


def test_both_sources_share_one_row_model_and_one_dict_shape() -> None:
    """A study's trials and a multirun's child runs are the same rows: the same JSON keys, the same best rule;
    each source fills in its own fields (state and last step, or run and status)."""
    study = SweepSummary(STUDY, "s", "minimize", (study_row(0, "COMPLETE", 0.4, "-"), study_row(1, "PRUNED", None, "-")),
                         ("optimizer.lr",))
    children = SweepSummary(RUNS, "s", "minimize", (run_row(0, "success", 0.4), run_row(1, "pruned", 0.1)), (),
                            parent_run_id="p")
    study_dict, children_dict = summary_dict(study), summary_dict(children)
    assert study_dict.keys() == children_dict.keys()
    assert study_dict["trials"][0].keys() == children_dict["trials"][0].keys()
    assert study_dict["best"]["trial"] == children_dict["best"]["trial"] == 0  # a pruned trial is never best
    assert study_dict["state_counts"]["PRUNED"] == 1 and children_dict["state_counts"] == {}
    assert children_dict["outcome_counts"]["pruned"] == 1 and study_dict["outcome_counts"]["pruned"] == 0
    assert "| 1 | PRUNED | - | - | - | 1.235e-05 |  |" in summary_markdown(study)
    assert "| 1 | pruned | 0.1 | run1 |  |" in summary_markdown(children)


def test_log_swept_parameters_get_log_axes() -> None:
    from rookworld.sweep.report.plots import outcome_vs_params_figure

    runs = tuple(run_row(i, "success", 0.1 * i, **{"optimizer.lr": str(lr), "kl.coef": str(c)})
                 for i, (lr, c) in enumerate([(1e-6, 0.1), (1e-5, 0.2), (1e-4, 0.3)]))
    summary = SweepSummary(RUNS, "s", "maximize", runs, ("kl.coef", "optimizer.lr"), parent_run_id="p",
                           log_scale=("optimizer.lr",))
    figure = outcome_vs_params_figure(summary)
    assert {axes.get_xlabel(): axes.get_xscale() for axes in figure.axes} == {"kl.coef": "linear", "optimizer.lr": "log"}


def test_summarise_with_a_missing_tracking_store_is_one_line_and_creates_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rookworld.sweep.__main__ import main as sweep_command

    journal = f"journal:{tmp_path / 's.journal'}"
    optuna.create_study(study_name="s", storage=open_storage(journal, str(tmp_path), default_timeouts()))
    missing = tmp_path / "nowhere" / "mlflow.db"
    assert sweep_command(["summary", "--study", "s", "--storage", journal, "--tracking-uri", f"sqlite:///{missing}"]) == 2
    err = capsys.readouterr().err
    assert err == f"rookworld: error: --tracking-uri sqlite:///{missing}: no MLflow store at {missing} (or --no-mlflow)\n"
    assert not missing.exists() and not missing.parent.exists()


def test_plots_keep_the_running_best_label_whole_steps_distinct_curves_and_clean_log_axes(tmp_path: Path) -> None:
    from matplotlib.ticker import NullFormatter
    from mlflow import MlflowClient

    from rookworld.sweep.report.plots import optimisation_history_figure, outcome_vs_params_figure, reward_curves_figure

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("plots")
    runs = []
    for i, lr in enumerate([2e-6, 3e-6, 5e-6]):
        run = client.create_run(experiment).info.run_id
        for step in range(5):
            client.log_metric(run, "reward", 0.1 * step, step=step)  # the same curve for every trial
        runs.append(TrialRow(i, "success", 0.1 * i, {"optimizer.lr": str(lr)}, run_id=run, status="FINISHED"))
    summary = SweepSummary(RUNS, "s", "maximize", tuple(runs), ("optimizer.lr",), parent_run_id="p",
                           log_scale=("optimizer.lr",))

    history = optimisation_history_figure(summary)
    assert [t.get_text() for t in history.axes[0].get_legend().get_texts()] == ["running best", "success"]

    curves = reward_curves_figure(client, summary, top_k=3)
    curves.canvas.draw()
    axes = curves.axes[0]
    assert all(float(x).is_integer() for x in axes.get_xticks())  # steps: no tick at 1.25
    assert len({(line.get_linestyle(), line.get_marker()) for line in axes.get_lines()}) == 3  # none hidden

    params = outcome_vs_params_figure(summary)
    params.canvas.draw()
    axis = params.axes[0].xaxis
    assert isinstance(axis.get_minor_formatter(), NullFormatter)
    assert not [label for label in axis.get_ticklabels(minor=True) if label.get_text()]


def test_the_timeline_counts_a_replaced_worker_in_its_slot(tmp_path: Path) -> None:
    import json

    from rookworld.sweep.timeline import read_timeline

    control = tmp_path / ".sweep"
    control.mkdir()
    (control / "launch.json").write_text(json.dumps({"start": 0.0, "workers": 2}))
    events = {0: [("start", 0, 0.0), ("end", 0, 10.0)],
              1: [("start", 1, 0.0)],  # killed mid-trial: no end
              2: [("start", 2, 2.0), ("end", 2, 10.0)]}  # its replacement
    for worker, rows in events.items():
        (control / f"worker_{worker}.jsonl").write_text("".join(
            json.dumps({"event": e, "trial": n, "t": t, "worker": worker}) + "\n" for e, n, t in rows))
    timeline = read_timeline(tmp_path)
    assert (timeline.workers, timeline.trials, timeline.wall_s) == (2, 2, 10.0)
    assert timeline.idle == 0.1  # 18 busy seconds of 2 slots x 10 s


def test_the_slot_occupancy_counts_the_trials_at_once_on_each_gpu_over_its_busy_time() -> None:
    """GPU a: trials over [0, 10] and [0, 4], then back to back [10, 12], [12, 14] (never two at once there), then
    a gap (a later job) and [100, 106]: 20 busy seconds, 24 trial-seconds. GPU b: one trial over [0, 8]."""
    from rookworld.stats.throughput import slot_occupancy

    occupancy = slot_occupancy({"a": [(0.0, 10.0), (0.0, 4.0), (10.0, 12.0), (12.0, 14.0), (100.0, 106.0)],
                                "b": [(0.0, 8.0)]})
    assert occupancy is not None
    assert (occupancy.gpus, occupancy.busy_s, occupancy.max) == (2, 28.0, 2)
    assert occupancy.mean == round((10 + 4 + 2 + 2 + 6 + 8) / 28, 2)  # the gap between jobs lowers nothing
    assert slot_occupancy({}) is None


def test_the_summary_says_when_the_best_is_worse_than_the_untrained_model_or_the_baseline(tmp_path: Path) -> None:
    """Child runs in a real sqlite MLflow store: the untrained model's score is each run's objective at step 0
    (objective/start, the trainer logs it); the smoke sweep's best once fell below it and nothing said so."""
    from mlflow import MlflowClient

    from rookworld.sweep.report.summary import summarise_children
    from rookworld.tracking import OUTCOME_TAG, PARENT_TAG, TRIAL_TAG

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.create_experiment("sweep", artifact_location=str(tmp_path / "mlruns"))
    parent = client.create_run(experiment).info.run_id
    for trial, (objective, start) in enumerate([(0.3542, 0.3568), (0.3401, 0.3568)]):
        run = client.create_run(experiment, tags={PARENT_TAG: parent, TRIAL_TAG: str(trial), OUTCOME_TAG: "success"})
        client.log_metric(run.info.run_id, "objective", objective)
        client.log_metric(run.info.run_id, "objective/start", start)
    text = summary_markdown(summarise_children(client, parent))
    assert "The best is WORSE than the untrained model (objective at step 0): 0.3542 against 0.3568 (-0.0026): " \
           "no trial improved on it." in text, text

    search = TrialRow(0, "success", 0.62, {}, state="COMPLETE", start=0.558, stage=SEARCH, config="0")
    raced = [TrialRow(n, "success", v, {}, state="COMPLETE", stage=stage, config="baseline")
             for n, v, stage in [(1, 0.61, SEARCH), (2, 0.60, SEARCH), (3, 0.50, RACE)]]  # the race's not compared
    lines = summary_markdown(SweepSummary(STUDY, "s", "maximize", (search, *raced), ())).splitlines()
    assert "Against the untrained model (objective at step 0): 0.558 -> 0.62 (+0.0620)." in lines
    assert "Against the baseline configuration (its mean): 0.605 -> 0.62 (+0.0150)." in lines
    raced = [TrialRow(n, "success", v, {}, state="COMPLETE", stage=SEARCH, config="baseline") for n, v in [(1, 0.66), (2, 0.64)]]
    text = summary_markdown(SweepSummary(STUDY, "s", "maximize", (search, *raced), ()))
    assert "The best is the baseline configuration itself: no searched configuration beat it." in text, text


def test_the_sweep_table_shows_the_chess_skill_each_run_logged(tmp_path: Path) -> None:
    """Child runs in a real sqlite MLflow store: best move, win-probability loss, mate in one and A: exact
    next state stand beside the objective, for the metrics the runs logged (none: no such columns)."""
    from mlflow import MlflowClient

    from rookworld.sweep.report.summary import summarise_children
    from rookworld.tracking import OUTCOME_TAG, PARENT_TAG, TRIAL_TAG

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.create_experiment("sweep", artifact_location=str(tmp_path / "mlruns"))
    parent = client.create_run(experiment).info.run_id
    for trial, (objective, best, loss) in enumerate([(0.61, 0.072, 0.1834), (0.63, 0.081, None)]):
        run = client.create_run(experiment, tags={PARENT_TAG: parent, TRIAL_TAG: str(trial), OUTCOME_TAG: "success"})
        client.log_metric(run.info.run_id, "objective", objective)
        client.log_metric(run.info.run_id, "eval/P/best_move", best)
        if loss is not None:
            client.log_metric(run.info.run_id, "eval/P/win_prob_loss", loss)
    lines = summary_markdown(summarise_children(client, parent)).splitlines()
    header = next(line for line in lines if line.startswith("| trial"))
    assert header.startswith("| trial | outcome | objective | best move | win-prob loss | run |"), header
    assert "mate in 1" not in header
    assert any(line.startswith("| 0 | success | 0.61 | 0.072 | 0.1834 |") for line in lines), lines
    assert any(line.startswith("| 1 | success | 0.63 | 0.081 | - |") for line in lines), lines
