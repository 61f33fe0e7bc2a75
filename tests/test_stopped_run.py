"""SIGTERM to the README's test command (pytest with xdist workers) leaves no process and no PostgreSQL
server behind (tests/stopped_run.py), and says in one line that it was stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sweep_helpers import REPO, alive, descendants, subprocess_env, wait_for

SLOW_TESTS = ("tests/test_sweep_workers.py::test_three_sweeps_share_one_postgresql_study",  # a server, three sweeps
              "tests/test_sweep_workers.py::test_a_stopped_sweep_closes_its_trials_and_says_so_in_one_line")


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def server_folders(pids: set[int]) -> set[str]:
    """The data folders of the PostgreSQL servers among `pids` (postgres -D /tmp/rookworld-pg-.../data)."""
    return {line.split(" -D ", 1)[1].split()[0] for line in map(command_line, pids) if "/postgres -D " in line}


def every_process() -> set[int]:
    return {int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()}


@pytest.mark.slow
def test_sigterm_to_pytest_leaves_no_process_and_no_postgresql_server(tmp_path: Path) -> None:
    ours_before = descendants(os.getpid())
    env = {k: v for k, v in subprocess_env().items() if not k.startswith("PYTEST_")}  # a run of its own, not a worker
    with open(tmp_path / "pytest.log", "w") as log:
        run = subprocess.Popen([sys.executable, "-m", "pytest", *SLOW_TESTS, "-m", "slow", "-n", "2", "-p", "no:cacheprovider",
                                f"--basetemp={tmp_path / 'run'}"], cwd=REPO, env=env, stdout=log,
                               stderr=subprocess.STDOUT)

    def under_way() -> bool:
        below = descendants(run.pid)
        return run.poll() is not None or (bool(server_folders(below))
                                          and sum("rookworld.train" in command_line(pid) for pid in below) >= 2)

    wait_for(under_way, 300, "its PostgreSQL server and sweeps to start")
    assert run.poll() is None, (tmp_path / "pytest.log").read_text()[-3000:]
    tree = descendants(run.pid)
    servers = server_folders(tree)
    run.send_signal(signal.SIGTERM)
    run.wait(timeout=180)
    output = (tmp_path / "pytest.log").read_text()
    left = {pid for pid in tree | (descendants(os.getpid()) - ours_before) if alive(pid)}
    assert not left, [command_line(pid) for pid in left]
    assert not server_folders(every_process()) & servers, output[-3000:]
    assert "KeyboardInterrupt: stopped by SIGTERM" in output and "OSError" not in output, output[-3000:]
