"""The storage's clock: the one time every host of a sweep reads alike, for heartbeats (a node minutes
behind would see others' live trials as silent). PostgreSQL: the server's `clock_timestamp()`; a file storage:
the modification time the file system gives `<storage>.clock` when touched (on NFS and Lustre the file
server's clock; on a local disk the one host's).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import sqlalchemy
from sqlalchemy.pool import NullPool

from rookworld.sweep.storage.storage_url import database_url, storage_file


class StorageClock:
    """`now()`: seconds since the epoch by the storage's clock."""

    def __init__(self, url: str, base_dir: str, connect_args: dict[str, Any] | None = None) -> None:
        path = storage_file(url, base_dir)
        self._file: Path | None = None if path is None else path.with_name(f"{path.name}.clock")
        self._url, self._connect_args = url, connect_args or {}

    def now(self) -> float:
        if self._file is not None:
            with open(self._file, "a"):
                os.utime(self._file)  # times=None: "now" by the file system's clock
            return os.stat(self._file).st_mtime
        return self._database_now()

    def _database_now(self) -> float:
        engine = sqlalchemy.create_engine(database_url(self._url), poolclass=NullPool, connect_args=self._connect_args)
        try:
            with engine.connect() as connection:
                return float(connection.execute(sqlalchemy.text("SELECT extract(epoch FROM clock_timestamp())")).scalar())
        finally:
            engine.dispose()
