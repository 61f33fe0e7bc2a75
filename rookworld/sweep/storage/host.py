"""Which process runs a trial, named so that another process can tell whether it is still alive.

A host is more than its hostname: containers on one machine may share the hostname but not their
processes. `host_id()` is `hostname/boot/pid-namespace`: two processes with the same host id see
the same process table, so one can check the other's pid. A process is its host id, pid and start
time (clock ticks since boot, from /proc): a pid reused by a later process is not mistaken for it.
"""

from __future__ import annotations

import os
import socket
from functools import cache
from pathlib import Path


@cache
def host_id() -> str:
    """`hostname/boot id/pid namespace` (hostname alone where /proc does not tell the rest)."""
    parts = [socket.gethostname()]
    try:
        parts.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8])
        parts.append(os.readlink("/proc/self/ns/pid").removeprefix("pid:[").removesuffix("]"))
    except OSError:
        pass
    return "/".join(parts)


def process_start(pid: int) -> int | None:
    """The start time of process `pid` (clock ticks after boot); None when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):  # dead, waiting to be reaped
        return None
    return int(fields[19])


def process_alive(pid: int, started: int | None) -> bool:
    """True while process `pid` (of this host id) runs; `started` None: any process with that pid."""
    if not Path("/proc").is_dir():  # no procfs: the pid alone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    now = process_start(pid)
    return now is not None and (started is None or now == started)
