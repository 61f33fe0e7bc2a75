"""Shared by the sharded annotation tests: start an annotate run and kill it once it has a complete part."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rookworld.data.run_folder import DONE_FILE


def kill_after_first_part(args: list[str], folder: Path, timeout_s: float = 60) -> dict:
    """Run `python -m rookworld.data.annotate ARGS` until `folder`'s done file appears, SIGKILL the run,
    its workers and their engines, and return the done file as the kill left it."""
    command = [sys.executable, "-m", "rookworld.data.annotate", *args]
    process = subprocess.Popen(command, start_new_session=True, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    while not (folder / DONE_FILE).exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return json.loads((folder / DONE_FILE).read_text())
