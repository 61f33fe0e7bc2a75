"""One lock per study storage, shared by every sweep process and worker on every machine:
`with storage_lock(url, base_dir, "study:smoke", timeouts): ...` around each ask and the parent run's creation.

- File storages: an exclusive `flock` on `PATH.<name>.lock`, released by the kernel when its holder exits (even
  by SIGKILL); shared between machines only where the file system makes it so (docs/sweeps.md).
- PostgreSQL: a transaction advisory lock keyed by a hash of the name, on its own connection, with a lease: the
  holder touches the connection every third of `lock_lease_s`; one that stops (a frozen node, a lost network)
  leaves its transaction idle and the server ends its session after `lock_lease_s`, which releases the lock.
  Waiting longer than `lock_wait_s` is a StorageFault.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
from typing import Iterator

import sqlalchemy
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from rookworld.sweep.storage.periodic import Periodic
from rookworld.sweep.storage.storage_url import DbTimeouts, database_url, is_database, masked, redacted, storage_file
from rookworld.tracking import one_line


class StorageFault(RuntimeError):
    """The study's storage failed under a sweep (a timeout, a full disk): reported in one line."""


def lock_key(name: str) -> int:
    """A signed 64-bit key (PostgreSQL's bigint) for a lock name."""
    return int.from_bytes(hashlib.sha1(name.encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def storage_lock(url: str, base_dir: str, name: str, timeouts: DbTimeouts) -> Iterator[None]:
    """Hold the lock `name` of the storage at `url` (see the module docstring)."""
    path = storage_file(url, base_dir)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        with open(path.with_name(f"{path.name}.{safe}.lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield  # closing the file releases the lock
        return
    if not is_database(url):
        raise ValueError("expected journal:PATH, sqlite:///PATH or postgresql://... (the sweep locks need one of them)")
    with _database_lock(url, name, timeouts):
        yield


@contextlib.contextmanager
def _database_lock(url: str, name: str, timeouts: DbTimeouts) -> Iterator[None]:
    engine = sqlalchemy.create_engine(database_url(url), poolclass=NullPool, connect_args=timeouts.lock_connect_args())
    try:
        with engine.connect() as connection:
            try:
                connection.execute(sqlalchemy.text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock_key(name)})
            except DBAPIError as error:
                if "lock timeout" not in str(error):
                    raise
                raise StorageFault(f"hydra.sweeper.lock_wait_s={timeouts.lock_wait_s:g}: waited that long for the lock "
                                   f"{name!r} of {masked(url)} (another sweep holds it)") from None
            with Periodic(lambda: _touch(connection), timeouts.lock_lease_s / 3, "rookworld-lock-lease"):
                yield
            try:
                connection.commit()  # ends the transaction: releases the lock
            except DBAPIError as error:
                raise StorageFault(f"hydra.sweeper.lock_lease_s={timeouts.lock_lease_s:g}: lost the lock {name!r} of "
                                   f"{masked(url)} ({redacted(one_line(error), url)})") from None
    finally:
        engine.dispose()


def _touch(connection: object) -> bool:
    """One beat of the lock's lease: False once the session is gone (the holder's commit reports it)."""
    try:
        connection.execute(sqlalchemy.text("SELECT 1"))  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - the session is gone: the holder's commit reports it
        return False
    return True
