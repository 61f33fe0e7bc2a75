"""A stopped test run leaves no process behind. SIGTERM to pytest stops the run as Ctrl-C does: each
pytest process passes it on to its children in its own process group (those Ctrl-C would reach: the
controller's xdist workers, a worker's sweep subprocesses, which close their runs and exit) and raises
KeyboardInterrupt, so the session's fixtures tear down (the PostgreSQL server stops). Each pytest process
is a child subreaper, so whatever it started and orphaned (a sweep's workers, a daemonised server) stays
below it, and at its end it stops every process still running there."""

from __future__ import annotations

import ctypes
import os
import signal
import time

from sweep_helpers import alive, descendants

_PR_SET_CHILD_SUBREAPER = 36
STOP_GRACE_S = 5.0  # how long a process left at the end has to exit on SIGTERM before SIGKILL


def become_subreaper() -> None:
    """Orphans below this process are reparented to it rather than to init (Linux; a no-op elsewhere)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (AttributeError, OSError):
        pass


def stop_on_sigterm() -> None:
    """SIGTERM raises KeyboardInterrupt here (once: a second one ends the process at once), first passing
    it on to this process's children in its process group."""
    def interrupt(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        group = os.getpgid(0)
        for pid in _children(os.getpid()):
            if _group(pid) == group:
                _signal(pid, signal.SIGTERM)
        raise KeyboardInterrupt("stopped by SIGTERM")

    signal.signal(signal.SIGTERM, interrupt)


def stop_leftovers() -> int:
    """SIGTERM to every live process below this one, SIGKILL to those still alive after STOP_GRACE_S, then
    reap them; the number that were left."""
    left = {pid for pid in descendants(os.getpid()) if alive(pid)}
    for pid in left:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while any(alive(pid) for pid in left) and time.monotonic() < deadline:
        _reap()
        time.sleep(0.1)
    for pid in left:
        if alive(pid):
            _signal(pid, signal.SIGKILL)
    _reap()
    return len(left)


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for child in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _reap() -> None:
    """Collect exited children (orphans reparented here, whom no Popen waits for)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
