"""Sweeps under faults, with real components: a torn or full journal, a PostgreSQL server that hangs or a lock
holder that freezes, a wall clock ten minutes behind, two spellings of one tracking store, MPS (a stand-in
for NVIDIA's control program: an external program), a password in the storage URL, a worker killed mid-trial.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import optuna
import pytest
from optuna.trial import TrialState
from sweep_helpers import (
    PASSWORD,
    REPO,
    SHARED_TRIALS,
    Launches,
    alive,
    load_study,
    mlflow_runs,
    subprocess_env,
    sweep_command,
    wait_for,
    with_password,
)

from rookworld.sweep.running.launch import FIXED_ATTR, UserError, check_fixed_settings
from rookworld.sweep.storage.clock import StorageClock
from rookworld.sweep.storage.journal import SafeJournalBackend
from rookworld.sweep.storage.lock import StorageFault, storage_lock
from rookworld.sweep.storage.storage_url import DbTimeouts, default_timeouts, masked, redacted
from rookworld.sweep.storage.study import (
    OWNER_ATTR,
    RETRY_OF_ATTR,
    STALE_ATTR,
    Heartbeat,
    finished_count,
    open_storage,
    resolve_stale_trials,
    trial_id,
)
from rookworld.tracking import ROLE_TAG, TRIAL_TAG

optuna.logging.set_verbosity(optuna.logging.WARNING)
FAKE_MPS = REPO / "tests" / "fake_mps"


def finished_study(url: str, base_dir: str, trials: int = 3) -> optuna.Study:
    study = optuna.create_study(study_name="s", storage=open_storage(url, base_dir, default_timeouts()))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=trials)
    return study


def reopened(url: str, base_dir: str) -> optuna.Study:
    return optuna.load_study(study_name="s", storage=open_storage(url, base_dir, default_timeouts()))


# ---------------------------------------------------------------- the journal


def test_a_journal_torn_mid_record_is_repaired_and_the_study_resumes(tmp_path: Path,
                                                                     capfd: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.journal"
    url = f"journal:{path}"
    finished_study(url, str(tmp_path))
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"op_code":4,"worker_id":"cut-off-he')  # a writer cut off mid-record

    study = reopened(url, str(tmp_path))
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3
    notice = capfd.readouterr().err
    assert f"rookworld: journal {path}: dropped 36 bytes of torn records" in notice and notice.count("\n") == 1
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)  # it resumes, and appends cleanly
    assert len(reopened(url, str(tmp_path)).trials) == 4 and path.read_bytes().startswith(whole)


def test_a_record_appended_to_a_torn_one_is_kept(tmp_path: Path) -> None:
    """A journal damaged before this repair existed: the next record was glued onto the torn line."""
    path = tmp_path / "s.journal"
    url = f"journal:{path}"
    finished_study(url, str(tmp_path), trials=2)
    lines = path.read_bytes().splitlines(keepends=True)
    glued = lines[:-1] + [b'{"op_code":6,"wor' + lines[-1]]  # the last record (trial 1 told) glued onto a torn one
    path.write_bytes(b"".join(glued))

    study = reopened(url, str(tmp_path))
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 2


def small_tmpfs(tmp_path: Path, size: str) -> Iterator[Path]:
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    yield from small_tmpfs(tmp_path, "256k")


def test_a_full_disk_fails_the_write_in_one_line_and_leaves_the_journal_readable(tiny_disk: Path) -> None:
    path = tiny_disk / "s.journal"
    url = f"journal:{path}"
    study = finished_study(url, str(tiny_disk))
    filler = tiny_disk / "filler"
    with open(filler, "wb", buffering=0) as handle:  # fill the disk to its last page
        try:
            while True:
                handle.write(b"x" * 4096)
        except OSError:
            pass
    size = path.stat().st_size
    with pytest.raises(StorageFault) as error:
        for _ in range(200):  # some writes may still fit in the file's last page
            trial = study.ask()
            trial.suggest_float("x", 0, 1)
            study.tell(trial, 0.5)
    assert "cannot write the journal" in str(error.value) and "No space left on device" in str(error.value)
    assert "\n" not in str(error.value)
    assert path.stat().st_size >= size and path.read_bytes().endswith(b"\n")  # no torn record left behind

    filler.unlink()  # space freed: the study resumes with every finished trial
    resumed = reopened(url, str(tiny_disk))
    complete = [t for t in resumed.trials if t.state == TrialState.COMPLETE]
    assert len(complete) >= 3
    resumed.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)


def fill_last_page(study: optuna.Study, path: Path, page: int = 4096) -> None:
    """Pad the journal with a study user attr to a whole number of pages: its next record needs a new page."""
    size = path.stat().st_size
    study.set_user_attr("padding", "")
    empty = path.stat().st_size - size
    room = -path.stat().st_size % page
    study.set_user_attr("padding", "x" * (room - empty if room >= empty else room + page - empty))
    assert path.stat().st_size % page == 0


@pytest.mark.slow
def test_a_sweep_on_a_full_disk_ends_in_one_line_and_leaves_its_journal_readable(tiny_disk: Path,
                                                                                tmp_path: Path) -> None:
    path = tiny_disk / "smoke.journal"
    url = f"journal:{path}"
    finished = optuna.create_study(study_name="smoke", storage=open_storage(url, str(tiny_disk), default_timeouts()),
                                   direction="maximize")
    finished.enqueue_trial({"optimizer.lr": 1e-4})
    fill_last_page(finished, path)
    with open(tiny_disk / "filler", "wb", buffering=0) as handle:  # no page left
        try:
            while True:
                handle.write(b"x" * 4096)
        except OSError:
            pass
    before = path.read_bytes()
    result = subprocess.run(sweep_command(f"hydra.sweeper.storage={url}"), cwd=tmp_path, env=subprocess_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    ours = [line for line in result.stderr.splitlines() if " INFO mlflow." not in line]  # a fresh store's notes
    assert len(ours) == 1 and ours[0].startswith(f"rookworld: error: cannot write the journal {path} (No space left "
                                                 "on device): the write was undone"), result.stderr
    assert path.read_bytes() == before and len(load_study(url).trials) == 1  # readable, as it was


# ---------------------------------------------------------------- PostgreSQL


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts connections and never answers; its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


def timeouts(**changes: float) -> DbTimeouts:
    base = {"connect_s": 2, "statement_s": 30, "lock_wait_s": 30, "lock_lease_s": 30}
    return DbTimeouts(**{**base, **changes})


def test_a_server_that_never_answers_fails_within_the_connect_timeout(silent_server: int) -> None:
    pytest.importorskip("psycopg2", reason="the PostgreSQL driver: pip install 'rookworld[postgresql]'")
    from rookworld.sweep.storage.study import STORAGE_ERRORS

    started = time.monotonic()
    with pytest.raises(STORAGE_ERRORS, match="timeout expired"):
        open_storage(f"postgresql://u:hunter2@127.0.0.1:{silent_server}/optuna", "/", timeouts(connect_s=2))
    assert time.monotonic() - started < 30  # liveness: bounded (2 s, libpq's floor), not the OS's minutes


@pytest.mark.slow
def test_a_sweep_on_a_server_that_never_answers_says_so_in_one_line(tmp_path: Path, silent_server: int) -> None:
    url = f"postgresql://rookworld:hunter2@127.0.0.1:{silent_server}/optuna"
    result = subprocess.run(sweep_command("sweep_storage=postgresql", "hydra.sweeper.connect_timeout_s=2"),
                            cwd=tmp_path, env=subprocess_env(ROOKWORLD_OPTUNA_STORAGE=url), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    line = f"rookworld: error: hydra.sweeper.storage='postgresql://rookworld:***@127.0.0.1:{silent_server}/optuna': " \
           "cannot open the Optuna storage ("
    assert result.stderr.startswith(line) and "timeout expired" in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "hunter2" not in result.stderr + result.stdout
    assert not (tmp_path / "outputs").exists() and mlflow_runs(tmp_path) == []  # nothing left behind


def test_a_lock_wait_past_its_timeout_is_one_line(postgres_url: str) -> None:
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with storage_lock(postgres_url, "/", "study:wait", timeouts()):
            held.set()
            release.wait(60)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(30)
        with pytest.raises(StorageFault) as error:
            with storage_lock(postgres_url, "/", "study:wait", timeouts(lock_wait_s=1)):
                pass
        assert str(error.value).startswith("hydra.sweeper.lock_wait_s=1: waited that long for the lock 'study:wait'")
    finally:
        release.set()
        thread.join()


HOLD_AND_FREEZE = """
import os, signal, sys
from rookworld.sweep.storage.lock import storage_lock
from rookworld.sweep.storage.storage_url import DbTimeouts
with storage_lock(sys.argv[1], "/", "study:frozen", DbTimeouts(2, 30, 30, float(sys.argv[2]))):
    print("held", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # a node that freezes while it holds the study's lock
"""


def test_a_frozen_lock_holder_loses_the_lock_after_its_lease(postgres_url: str) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD_AND_FREEZE, postgres_url, "3"], env=subprocess_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        wait_for(lambda: Path(f"/proc/{holder.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T", 30,
                 "the holder to stop")
        started = time.monotonic()
        with storage_lock(postgres_url, "/", "study:frozen", timeouts(lock_wait_s=60)):
            waited = time.monotonic() - started
        assert 1 < waited < 30, waited  # released by the server after the 3 s lease, long before lock_wait_s
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------- heartbeats and hosts


SKEWED_WORKER = """
import sys, time
import optuna
from rookworld.sweep.storage.clock import StorageClock
from rookworld.sweep.storage.storage_url import default_timeouts
from rookworld.sweep.storage.study import Heartbeat, open_storage
real = time.time
time.time = lambda: real() - 600  # this host's wall clock is ten minutes behind
url, base = sys.argv[1], sys.argv[2]
storage = open_storage(url, base, default_timeouts())
heartbeat = Heartbeat(storage, 60, StorageClock(url, base))
heartbeat.own(int(sys.argv[3]))
print("stamped", flush=True)
time.sleep(600)
"""


def test_a_worker_whose_clock_is_ten_minutes_behind_keeps_its_live_trial(tmp_path: Path) -> None:
    url = f"journal:{tmp_path / 's.journal'}"
    storage = open_storage(url, str(tmp_path), default_timeouts())
    study = optuna.create_study(study_name="s", storage=storage)
    trial = study.ask()
    worker = subprocess.Popen([sys.executable, "-c", SKEWED_WORKER, url, str(tmp_path),
                               str(trial_id(storage, "s", trial.number))], env=subprocess_env(), stdout=subprocess.PIPE,
                              text=True)
    try:
        assert worker.stdout is not None and worker.stdout.readline() == "stamped\n"
        stamp = dict(study.trials[0].system_attrs[OWNER_ATTR])
        stamp["host"] = "another-machine/" + stamp["host"].split("/", 1)[-1]  # judged as if it ran elsewhere
        storage.set_trial_system_attr(trial_id(storage, "s", trial.number), OWNER_ATTR, stamp)

        stale = resolve_stale_trials(study, storage, grace_s=300, retries=1, clock=StorageClock(url, str(tmp_path)))
        assert stale == [] and study.trials[0].state == TrialState.RUNNING
    finally:
        worker.kill()
        worker.wait()


def test_a_worker_of_another_container_with_our_hostname_is_judged_by_its_heartbeat(tmp_path: Path) -> None:
    import socket as sockets

    url = f"journal:{tmp_path / 's.journal'}"
    storage = open_storage(url, str(tmp_path), default_timeouts())
    study = optuna.create_study(study_name="s", storage=storage)
    trial = study.ask()
    clock = StorageClock(url, str(tmp_path))
    stamp = {"host": f"{sockets.gethostname()}/00000000/4026531836", "pid": 2 ** 22 + 7, "started": 1,
             "heartbeat": clock.now()}  # same hostname, another pid namespace: its pid means nothing here
    storage.set_trial_system_attr(trial_id(storage, "s", trial.number), OWNER_ATTR, stamp)
    assert resolve_stale_trials(study, storage, grace_s=300, retries=1, clock=clock) == []
    assert study.trials[0].state == TrialState.RUNNING


def test_the_heartbeat_thread_reports_a_storage_failure_in_one_line(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    url = f"journal:{tmp_path / 's.journal'}"
    storage = open_storage(url, str(tmp_path), default_timeouts())
    study = optuna.create_study(study_name="s", storage=storage)
    trial = study.ask()

    class ClockThatBreaks:
        """The storage's clock until `broken`, then a clock whose file server is gone."""

        def __init__(self, clock: StorageClock) -> None:
            self.clock, self.broken = clock, False

        def now(self) -> float:
            if self.broken:
                raise OSError("the file server is gone")
            return self.clock.now()

    clock = ClockThatBreaks(StorageClock(url, str(tmp_path)))
    heartbeat = Heartbeat(storage, 0.05, clock)  # type: ignore[arg-type]
    heartbeat.own(trial_id(storage, "s", trial.number))
    clock.broken = True
    with heartbeat:
        wait_for(lambda: "heartbeat not stamped: OSError: the file server is gone" in caplog.text, 10, "the warning")


# ---------------------------------------------------------------- MLflow parent


def test_two_spellings_of_one_tracking_store_give_one_parent(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_dir

    from rookworld.sweep.report.mlflow_parent import study_parent_run
    from rookworld.tracking import TrackingSettings, open_store

    (tmp_path / "link").symlink_to(tmp_path)
    study = optuna.create_study(study_name="s", storage=open_storage(f"journal:{tmp_path / 's.journal'}",
                                                                     str(tmp_path), default_timeouts()))
    with initialize_config_dir(config_dir=str(REPO / "conf")):
        config = compose("config", overrides=["tracking=mlflow"], return_hydra_config=True)
    parents = []
    for uri in (f"sqlite:///{tmp_path}/mlflow.db", f"sqlite:///{tmp_path}/link/./mlflow.db"):
        config.tracking.uri = uri
        settings = TrackingSettings.from_config(config.tracking, str(tmp_path))
        parents.append(study_parent_run(open_store(settings), settings, config, study, tmp_path))
    assert parents[0].run_id == parents[1].run_id and parents[1].tracking_uri.endswith("/link/./mlflow.db")
    assert len([r for r in mlflow_runs(tmp_path) if r.data.tags.get(ROLE_TAG) == "sweep_parent"]) == 1


@pytest.mark.slow
def test_a_tracking_server_named_127_0_0_1_and_localhost_gives_one_parent(tmp_path: Path) -> None:
    from hydra import compose, initialize_config_dir
    from test_tracking import mlflow_server

    from rookworld.sweep.report.mlflow_parent import study_parent_run
    from rookworld.tracking import TrackingSettings, open_store

    study = optuna.create_study(study_name="s", storage=open_storage(f"journal:{tmp_path / 's.journal'}",
                                                                     str(tmp_path), default_timeouts()))
    with initialize_config_dir(config_dir=str(REPO / "conf")):
        config = compose("config", overrides=["tracking=mlflow"], return_hydra_config=True)
    with mlflow_server("sqlite:///mlflow.db", tmp_path, timeout_s=120) as (base, _):
        parents = []
        for uri in (base, base.replace("127.0.0.1", "localhost")):  # two launches, two spellings of one server
            config.tracking.uri = uri
            settings = TrackingSettings.from_config(config.tracking, str(tmp_path))
            parents.append(study_parent_run(open_store(settings), settings, config, study, tmp_path))
    assert parents[0].run_id == parents[1].run_id
    assert len([r for r in mlflow_runs(tmp_path) if r.data.tags.get(ROLE_TAG) == "sweep_parent"]) == 1


# ---------------------------------------------------------------- passwords


def test_passwords_are_masked_in_urls_and_messages() -> None:
    url = "postgresql://rookworld:s3cr@t!@db.example:5432/optuna"
    assert masked(url) == "postgresql://rookworld:***@db.example:5432/optuna"
    assert masked("postgresql://rookworld@db/optuna") == "postgresql://rookworld@db/optuna"
    assert masked("journal:outputs/optuna/x.journal") == "journal:outputs/optuna/x.journal"
    assert redacted('connection to "s3cr@t!" failed', url) == 'connection to "***" failed'


def test_summarise_masks_the_storage_password(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("psycopg2", reason="the PostgreSQL driver: pip install 'rookworld[postgresql]'")
    from rookworld.sweep.__main__ import main as sweep_command

    port = socket.socket()
    port.bind(("127.0.0.1", 0))  # bound, not listening: the connection is refused at once
    try:
        url = f"postgresql://rookworld:hunter2@127.0.0.1:{port.getsockname()[1]}/optuna"
        assert sweep_command(["summary", "--study", "s", "--storage", url]) == 2
    finally:
        port.close()
    err = capsys.readouterr().err
    assert err.startswith(f"rookworld: error: cannot open Optuna storage {masked(url)} (") and err.count("\n") == 1
    assert "hunter2" not in err


# ---------------------------------------------------------------- MPS


def fake_mps_env(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> None:
    monkeypatch.setenv("PATH", f"{FAKE_MPS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    monkeypatch.setenv("FAKE_MPS_FAIL", "1" if fail else "0")


def daemon_pid(pipe_dir: str) -> int:
    return int(Path(pipe_dir, "control.pid").read_text())


def test_mps_starts_only_for_a_shared_gpu_and_stops_at_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rookworld.sweep.running.mps import MpsDaemon

    fake_mps_env(monkeypatch)
    assert MpsDaemon.for_workers("auto", ["0", "1"], tmp_path) is None  # one worker per GPU: nothing to share
    assert MpsDaemon.for_workers("off", ["0", "0"], tmp_path) is None
    daemon = MpsDaemon.for_workers("auto", ["1", "0", "1", "0"], tmp_path)
    assert daemon is not None and Path(daemon.pipe_dir, "control.devices").read_text() == "\n"  # sees every GPU
    pid = daemon_pid(daemon.pipe_dir)
    assert alive(pid) and daemon.env()["CUDA_MPS_PIPE_DIRECTORY"] == daemon.pipe_dir
    assert Path(daemon.log_dir) == tmp_path / "mps_log"
    daemon.stop()
    assert not alive(pid) and not Path(daemon.pipe_dir).exists()
    assert (tmp_path / "mps_log" / "control.log").read_text() == "quit\n"


def test_trial_mps_must_be_auto_on_or_off() -> None:
    from rookworld.specs.rules import ConfigError
    from rookworld.sweep.running.mps import mps_mode

    assert [mps_mode(m) for m in ("auto", "on", "off")] == ["auto", "on", "off"]
    with pytest.raises(ConfigError, match="trial.mps='yes': expected auto, on or off"):
        mps_mode("yes")


def test_mps_unavailable_is_a_one_line_notice_under_auto_and_an_error_under_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from rookworld.sweep.running.mps import MpsDaemon, MpsUnavailable

    fake_mps_env(monkeypatch, fail=True)
    assert MpsDaemon.for_workers("auto", ["0", "0"], tmp_path) is None
    err = capsys.readouterr().err
    assert err == ("rookworld: CUDA MPS unavailable (nvidia-cuda-mps-control: MPS is not supported on this GPU): 2 "
                   "workers share 1 GPUs by time slicing (trial.mps=off hides this notice)\n")
    with pytest.raises(MpsUnavailable, match="MPS is not supported on this GPU"):
        MpsDaemon.for_workers("on", ["0", "0"], tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(MpsUnavailable, match="no nvidia-cuda-mps-control on PATH"):
        MpsDaemon.for_workers("on", ["0", "0"], tmp_path)


@pytest.mark.slow
def test_a_sweep_with_mps_on_where_it_is_unavailable_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    env = subprocess_env(CUDA_VISIBLE_DEVICES="0", PATH=f"{FAKE_MPS}{os.pathsep}{os.environ['PATH']}", FAKE_MPS_FAIL="1")
    env.pop("CUDA_MPS_PIPE_DIRECTORY", None)
    result = subprocess.run(sweep_command("hydra.sweeper.n_jobs=2", "device=auto", "trial.trials_per_gpu=2",
                                          "trial.mps=on"), cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr == ("rookworld: error: trial.mps=on: CUDA MPS unavailable (nvidia-cuda-mps-control: MPS is "
                             "not supported on this GPU); trial.mps=auto falls back to time slicing\n")
    assert not (tmp_path / "outputs" / "sweeps").exists() and mlflow_runs(tmp_path) == []


KILLED_LAUNCH = """
import os, signal, sys
from pathlib import Path
from rookworld.sweep.running.mps import MpsDaemon
daemon = MpsDaemon.for_workers("on", ["0", "0"], Path(sys.argv[1]))
print(daemon.pipe_dir, (Path(daemon.pipe_dir) / "control.pid").read_text().strip(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_mps_is_stopped_when_its_launch_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_mps_env(monkeypatch)
    launch = subprocess.run([sys.executable, "-c", KILLED_LAUNCH, str(tmp_path)], env=subprocess_env(),
                            capture_output=True, text=True, timeout=60)
    assert launch.returncode == -signal.SIGKILL, launch.stderr
    pipe_dir, pid = launch.stdout.split()
    assert alive(int(pid)) or not Path(pipe_dir).exists()
    wait_for(lambda: not alive(int(pid)) and not Path(pipe_dir).exists(), 30, "the keeper to stop the MPS daemon")


# ---------------------------------------------------------------- a worker killed mid-trial


def worker_events(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(directory.glob("outputs/sweeps/smoke/*/.sweep/worker_*.jsonl"))
            for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_a_killed_worker_is_replaced_and_its_trial_rerun_in_the_same_launch(tmp_path: Path) -> None:
    """Two workers share "GPU 0" under MPS (the stand-in); worker 1 is SIGKILLed mid-trial: the launch fails and
    re-queues its trial at once, starts worker 2, finishes the study, ends every run and exits 0, and stops MPS.
    A second launch of the finished study leaves its summarised parent run as it was."""
    command = sweep_command("hydra.sweeper.n_trials=4", "hydra.sweeper.n_jobs=2", "steps=3", "device=auto",
                            "trial.trials_per_gpu=2", "trial.mps=on")
    env = subprocess_env(CUDA_VISIBLE_DEVICES="0", PATH=f"{FAKE_MPS}{os.pathsep}{os.environ['PATH']}")
    env.pop("CUDA_MPS_PIPE_DIRECTORY", None)
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)

    def worker_1_trial() -> dict[str, Any] | None:
        return next((e for e in worker_events(tmp_path) if e["worker"] == 1 and e["event"] == "start"), None)

    wait_for(lambda: worker_1_trial() is not None or first.poll() is not None, 300, "worker 1 to start a trial")
    assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
    ready = next(e for e in worker_events(tmp_path) if e["worker"] == 1 and e["event"] == "ready")
    killed_trial = worker_1_trial()["trial"]  # type: ignore[index]
    time.sleep(1)
    os.kill(ready["pid"], signal.SIGKILL)
    assert first.wait(timeout=600) == 0, (tmp_path / "first.log").read_text()[-3000:]

    output = (tmp_path / "first.log").read_text()
    assert (f"rookworld: sweep worker 1 (pid {ready['pid']}) was killed by SIGKILL: its trial {killed_trial} failed "
            "and re-queued; worker 2 started in its place") in output
    study = load_study(f"journal:{tmp_path}/outputs/optuna/smoke.journal")
    assert finished_count(study) == 4 and not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    stale = [t for t in study.trials if t.system_attrs.get(STALE_ATTR)]
    assert [t.number for t in stale] == [killed_trial]
    assert [t.user_attrs[RETRY_OF_ATTR] for t in study.trials if RETRY_OF_ATTR in t.user_attrs] == [killed_trial]
    assert len(list((tmp_path / "outputs/sweeps/smoke").iterdir())) == 1  # one launch did it all
    runs = mlflow_runs(tmp_path)
    assert all(r.info.status != "RUNNING" for r in runs), [(r.info.run_name, r.info.status) for r in runs]
    assert sum(r.data.tags.get(ROLE_TAG) == "sweep_parent" for r in runs) == 1

    events = worker_events(tmp_path)
    pipes = {e["mps"] for e in events if e["event"] == "ready"}
    assert len(pipes) == 1 and None not in pipes and not Path(pipes.pop()).exists()  # MPS used, then stopped
    assert {e["worker"] for e in events if e["event"] == "ready"} == {0, 1, 2}
    assert "rookworld: error" not in output and "Traceback" not in output

    parent = next(r for r in runs if r.data.tags.get(ROLE_TAG) == "sweep_parent")
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "# Optuna study smoke" in again.stdout
    after = next(r for r in mlflow_runs(tmp_path) if r.info.run_id == parent.info.run_id)
    assert (after.info.status, after.info.end_time) == ("FINISHED", parent.info.end_time)  # not reopened or redone
    assert {int(r.data.tags[TRIAL_TAG]) for r in runs if r.data.tags.get(ROLE_TAG) == "trial"} <= \
        {t.number for t in study.trials}


# ---------------------------------------------------------------- no password anywhere


@pytest.mark.slow
@pytest.mark.xdist_group("postgresql_sweeps")  # one worker sets up their shared launches
def test_no_password_appears_in_any_output_or_file_of_a_launch(postgresql_sweeps: Launches, postgres_url: str) -> None:
    """The three launches of sweep_helpers.postgresql_sweeps, whose storage URL holds PASSWORD."""
    for code, out, err in postgresql_sweeps.results:
        assert code == 0, err[-3000:]
        assert PASSWORD not in out + err
    directory = postgresql_sweeps.directory
    leaks = [str(path) for path in directory.rglob("*") if path.is_file() and PASSWORD.encode() in path.read_bytes()]
    assert leaks == []
    specs = list(directory.glob("outputs/sweeps/*/*/.sweep/worker_spec.pkl"))
    assert len(specs) == 3 and all(path.stat().st_mode & 0o777 == 0o600 for path in specs)
    study = optuna.load_study(study_name="smoke", storage=open_storage(with_password(postgres_url), "/",
                                                                        default_timeouts()))
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * SHARED_TRIALS


# ---------------------------------------------------------------- bad input leaves nothing behind


@pytest.mark.slow
@pytest.mark.parametrize(("override", "message"), [
    ("tracking.uri=http://127.0.0.1:9", "tracking.uri='http://127.0.0.1:9': cannot open the tracking store"),
    ("hydra.sweeper.direction=minimize", "hydra.sweeper.direction='minimize': study 'smoke' exists with direction "
                                         "maximize (another study_name starts a new one)"),
])
def test_a_tracking_store_down_or_a_direction_clash_is_one_line_and_leaves_no_launch_folder(
        tmp_path: Path, override: str, message: str) -> None:
    journal = f"journal:{tmp_path}/outputs/optuna/smoke.journal"
    optuna.create_study(study_name="smoke", storage=open_storage(journal, str(tmp_path), default_timeouts()),
                        direction="maximize")
    result = subprocess.run(sweep_command(override), cwd=tmp_path, env=subprocess_env(), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.startswith(f"rookworld: error: {message}") and result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "outputs" / "sweeps").exists() and mlflow_runs(tmp_path) == []
    assert load_study(journal).trials == []


def test_a_launch_with_other_fixed_settings_than_its_study_is_one_line_and_leaves_no_launch_folder(tmp_path: Path) -> None:
    """A study compares its trials: a launch whose fixed overrides differ from the first launch's (steps=1 on a
    6-step study) would add trials of another experiment to its table and best."""
    journal = f"journal:{tmp_path}/outputs/optuna/smoke.journal"
    study = optuna.create_study(study_name="smoke", storage=open_storage(journal, str(tmp_path), default_timeouts()),
                                direction="maximize")
    study.set_user_attr(FIXED_ATTR, ["steps=6", "sweeps=smoke"])
    result = subprocess.run(sweep_command(), cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2, result.stderr[-3000:]
    (line,) = [line for line in result.stderr.splitlines(keepends=True) if not line.startswith("[I ")]  # Optuna's log
    assert line.startswith("rookworld: error: ") and "steps=1 " in line and line.endswith(
        ": study 'smoke' ran its trials with steps=6 sweeps=smoke (this launch has no steps=6): give the same to join "
        "it, hydra.sweeper.study_name=NEW for a new study (or hydra.sweeper.accept_fixed_changes=true)\n"), line
    assert not (tmp_path / "outputs" / "sweeps").exists() and load_study(journal).trials == []


def test_the_first_launch_stores_its_fixed_settings_and_the_same_ones_join() -> None:
    study = optuna.create_study(study_name="s")
    check_fixed_settings(study, ("sweeps=smoke", "steps=6"))
    assert study.user_attrs[FIXED_ATTR] == ["steps=6", "sweeps=smoke"]
    check_fixed_settings(study, ("steps=6", "sweeps=smoke"))  # the same, in another order
    with pytest.raises(UserError, match=r"^steps=4: study 's' ran its trials with steps=6 sweeps=smoke \(this launch has no steps=6\)"):
        check_fixed_settings(study, ("sweeps=smoke", "steps=4"))
