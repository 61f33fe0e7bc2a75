"""Shared helpers for sweep tests: the tiny real sweep command, a real PostgreSQL server, process trees.
tests/conftest.py shares the session fixtures (one server, one set of PostgreSQL launches) with every module.

TINY_SWEEP is `sweeps=smoke` cut to one training step of the random tiny model (conf/model/tiny.yaml)
on two held-out problems: each trial is a real `rookworld.train` run, seconds long on a CPU. Its A:
training stream deals rare cases from small pools (SMALL_POOLS): filling conf/data/bundled.yaml's pools
takes a worker process ~10 s on a CPU before its first trial, and no sweep test needs them full.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import optuna
import pytest

from rookworld.sweep.storage.storage_url import default_timeouts

REPO = Path(__file__).resolve().parents[1]
PG_BINS = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))  # apt's layout
PG_BIN = PG_BINS[-1].parent if PG_BINS else Path("/usr/lib/postgresql/VERSION/bin")
SMALL_POOLS = ["data.arbiter_pool_size=8", "data.arbiter_pool_walks=400"]  # every rare case found, in 0.2 s
TINY_SWEEP = ["sweeps=smoke", "model=tiny", "steps=1", "eval.every=0", "eval.num_policy=2", "eval.num_arbiter=2",
              "trial/pruner=none", *SMALL_POOLS]


def subprocess_env(**extra: str) -> dict[str, str]:
    """This environment for a sweep subprocess: our checkout first, no inherited stores, one thread per
    worker (several sweeps share a small CI machine: more threads only spin against each other)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_TRACKING_URI", "CUDA_VISIBLE_DEVICES", "ROOKWORLD_OPTUNA_STORAGE")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return {**env, "OMP_NUM_THREADS": "1", **extra}


def sweep_command(*overrides: str) -> list[str]:
    """`python -m rookworld.train -m` on the tiny sweep, plus overrides."""
    return [sys.executable, "-m", "rookworld.train", "-m", *TINY_SWEEP, *overrides]


@dataclass(frozen=True)
class Launches:
    """Sweeps that ran to their end in `directory`: each one's exit code, stdout and stderr."""

    directory: Path
    results: list[tuple[int, str, str]]


SHARED_TRIALS = 6  # two rounds of the three launches' workers: the study's end is still a race between them


def three_sweeps(directory: Path, *overrides: str, **env: str) -> Launches:
    """Three sweeps started at once on one study of SHARED_TRIALS trials, one worker each; after they end."""
    command = sweep_command(f"hydra.sweeper.n_trials={SHARED_TRIALS}", "hydra.sweeper.n_jobs=1", *overrides)
    sweeps = [subprocess.Popen(command, cwd=directory, env=subprocess_env(**env), text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE) for _ in range(3)]
    outputs = [sweep.communicate(timeout=1200) for sweep in sweeps]
    return Launches(directory, [(sweep.returncode, out, err) for sweep, (out, err) in zip(sweeps, outputs)])


def load_study(url: str, name: str = "smoke") -> optuna.Study:
    from rookworld.sweep.storage.study import open_storage

    return optuna.load_study(study_name=name, storage=open_storage(url, "/", default_timeouts()))


def mlflow_runs(directory: Path) -> list[Any]:
    """Every run of the `rookworld` experiment in `directory`/mlflow.db (none if there is no store)."""
    from mlflow import MlflowClient

    if not (directory / "mlflow.db").exists():
        return []
    client = MlflowClient(tracking_uri=f"sqlite:///{directory / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("rookworld")
    return [] if experiment is None else client.search_runs([experiment.experiment_id])


# ---------------------------------------------------------------- processes


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    """True for a running process; a zombie (dead, not yet reaped) is not alive."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


# ---------------------------------------------------------------- a real PostgreSQL server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(*command: str) -> list[str]:
    """Run as the `postgres` user when we are root (PostgreSQL refuses to run as root)."""
    if os.geteuid() != 0:
        return list(command)
    runner = shutil.which("runuser")
    return [runner, "-u", "postgres", "--", *command] if runner else ["su", "postgres", "-c", " ".join(command)]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL server on 127.0.0.1 for this test session; its URL (database `optuna`)."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN} (apt-get install postgresql)")
    pytest.importorskip("psycopg2", reason="the PostgreSQL driver: pip install 'rookworld[postgresql]'")
    root = Path(tempfile.mkdtemp(prefix="rookworld-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    data, port = root / "data", _free_port()
    run = lambda *c: subprocess.run(_as_postgres(*c), check=True, capture_output=True, timeout=120)  # noqa: E731
    run(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
    run(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w", "start", "-o",
        f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200")
    try:
        run(str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "optuna")
        yield f"postgresql://postgres@127.0.0.1:{port}/optuna"
    finally:
        run(str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)


PASSWORD = "pw-Z9q7-secret"  # the server trusts every local connection: any password is accepted


def with_password(url: str) -> str:
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{PASSWORD}@")


@pytest.fixture(scope="session")
def postgresql_sweeps(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> Launches:
    """three_sweeps on the suite's PostgreSQL through a URL with a password (ROOKWORLD_OPTUNA_STORAGE): one
    set of launches for the tests of the shared study and of the password's masking."""
    directory = tmp_path_factory.mktemp("postgresql-sweeps")
    return three_sweeps(directory, "sweep_storage=postgresql", ROOKWORLD_OPTUNA_STORAGE=with_password(postgres_url))


def wait_for(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)
