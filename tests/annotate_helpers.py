"""Shared by the sharded annotation tests: start an annotate run and stop it once it has a complete part."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rookworld.data.run_folder import DONE_FILE


def kill_after_first_part(args: list[str], folder: Path, timeout_s: float = 60) -> dict:
    """Run `python -m rookworld.commands.annotate ARGS` until `folder`'s done file appears, SIGKILL the run,
    its workers and their engines, and return the done file as the kill left it."""
    process = _start_until_first_part(args, folder, subprocess.DEVNULL, timeout_s)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return json.loads((folder / DONE_FILE).read_text())


def interrupt_after_first_part(args: list[str], folder: Path, timeout_s: float = 60) -> tuple[int, str, list[str]]:
    """Like Ctrl-C in a terminal: SIGINT to the run's whole process group (the run, its workers and their
    engines) once `folder` has a complete part. Returns the run's exit code, its stderr, and the processes
    of the group still alive a moment after it exited."""
    with tempfile.TemporaryFile("w+") as stderr:
        process = _start_until_first_part(args, folder, stderr, timeout_s)
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=timeout_s)
        deadline = time.monotonic() + 5
        while (left := live_processes_in_group(process.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        stderr.seek(0)
        return code, stderr.read(), left


def live_processes_in_group(group: int) -> list[str]:
    """The command names of the running (not zombie) processes of process group `group` (Linux /proc)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the process ended while we looked
            continue
        name, fields = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
        if int(fields[2]) == group and fields[0] != "Z":
            alive.append(name)
    return alive


def _start_until_first_part(args: list[str], folder: Path, stderr, timeout_s: float) -> subprocess.Popen:
    command = [sys.executable, "-m", "rookworld.commands.annotate", *args]
    process = subprocess.Popen(command, start_new_session=True, stderr=stderr)
    deadline = time.monotonic() + timeout_s
    while not (folder / DONE_FILE).exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    return process
