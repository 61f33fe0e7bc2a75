"""The journal file storage (`journal:PATH`, Optuna's JournalStorage), made to survive faults: a torn record
(a writer cut off mid-line) is repaired on open, under Optuna's journal lock, keeping every record written in
full (one stderr line says how many bytes went); a write that fails (a full disk) is undone, the file cut back
to its size before it, and a StorageFault says so in one line.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock

from rookworld.sweep.storage.lock import StorageFault

RECORD_START = b'{"op_code":'  # how Optuna writes every record (json.dumps, compact separators)


def _parses(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def repaired(content: bytes) -> bytes:
    """The journal `content` without torn records (see the module docstring)."""
    kept = []
    for line in content.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            continue  # a torn last line
        if _parses(line):
            kept.append(line)
            continue
        start = line.rfind(RECORD_START, 1)
        if start > 0 and _parses(line[start:]):
            kept.append(line[start:])  # a record appended to a torn one
    return b"".join(kept)


def repair_journal(path: Path, lock: JournalFileSymlinkLock) -> int:
    """Drop the journal's torn records, under its lock; the number of bytes dropped."""
    if not path.exists():
        return 0
    lock.acquire()
    try:
        content = path.read_bytes()
        fixed = repaired(content) if content and (not content.endswith(b"\n") or not _all_parse(content)) else content
        if fixed == content:
            return 0
        temporary = path.with_name(path.name + ".repair")
        temporary.write_bytes(fixed)
        os.replace(temporary, path)
    finally:
        lock.release()
    dropped = len(content) - len(fixed)
    print(f"rookworld: journal {path}: dropped {dropped} bytes of torn records (a write cut off); the study "
          "resumes from the rest", file=sys.stderr, flush=True)
    return dropped


def _all_parse(content: bytes) -> bool:
    return all(_parses(line) for line in content.splitlines())


class SafeJournalBackend(JournalFileBackend):
    """Optuna's journal file, repaired on open; a failed write is undone and raised as a StorageFault."""

    def __init__(self, path: Path) -> None:
        lock = JournalFileSymlinkLock(str(path))
        repair_journal(path, lock)
        super().__init__(str(path), lock)

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        records = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs).encode()
        self._lock.acquire()
        try:
            size = os.stat(self._file_path).st_size
            try:
                with open(self._file_path, "ab") as handle:
                    handle.write(records)
                    handle.flush()
                    os.fsync(handle.fileno())
            except OSError as error:
                os.truncate(self._file_path, size)
                raise StorageFault(f"cannot write the journal {self._file_path} ({error.strerror or error}): "
                                   "the write was undone and the journal is intact; free space and run the same "
                                   "command again") from None
        finally:
            self._lock.release()
