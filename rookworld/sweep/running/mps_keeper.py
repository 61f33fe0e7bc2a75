"""`python -m rookworld.sweep.running.mps_keeper PIPE_DIR LOG_DIR LAUNCH_PID`: stops a launch's private MPS daemon when the
launch ends, however it ends (rookworld/sweep/running/mps.py)."""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import sys

from rookworld.sweep.running.mps import KEEPER_READY, control

_PR_SET_PDEATHSIG = 1


class _Stop(Exception):
    pass


def _stop(signum: int, frame: object) -> None:
    raise _Stop


def keep(pipe_dir: str, log_dir: str, launch_pid: str) -> int:
    """The keeper: wait for SIGTERM (from the launch, or from the kernel when the launch dies), then stop the daemon.
    Ctrl-C reaches the whole process group: the keeper ignores it (the workers still wind down on the GPU)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        signal.signal(signal.SIGTERM, _stop)
        if sys.platform.startswith("linux"):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != int(launch_pid):  # the launch died before prctl took effect
            raise _Stop
        sys.stdout.buffer.write(KEEPER_READY)
        sys.stdout.close()
        while True:
            signal.pause()
    except _Stop:
        pass
    try:
        control("quit", pipe_dir, log_dir)
    finally:
        shutil.rmtree(pipe_dir, ignore_errors=True)
    return 0

if __name__ == "__main__":
    sys.exit(keep(*sys.argv[1:]))
