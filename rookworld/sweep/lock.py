"""One lock per study storage, shared by every sweep process and worker on every machine.

    with storage_lock(url, base_dir, "study:smoke"):
        ...   # count the study's trials and ask for one more; create its MLflow parent run once

- File storages (`journal:PATH`, `sqlite:///PATH`): an exclusive `flock` on `PATH.<name>.lock`
  (local disks, and NFSv4 / Lustre / GPFS shares, where flock is a cluster-wide lock).
- PostgreSQL: a session advisory lock (`pg_advisory_lock`) keyed by a hash of the name, on its own
  connection.

Both are released when their holder exits, even by SIGKILL (the kernel closes the file, the server
ends the session), so a killed sweep never leaves its lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
from typing import Iterator

from rookworld.sweep.storage_url import database_url, storage_file


def lock_key(name: str) -> int:
    """A signed 64-bit key (PostgreSQL's bigint) for a lock name."""
    return int.from_bytes(hashlib.sha1(name.encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def storage_lock(url: str, base_dir: str, name: str) -> Iterator[None]:
    """Hold the lock `name` of the storage at `url` (see the module docstring)."""
    path = storage_file(url, base_dir)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        with open(path.with_name(f"{path.name}.{safe}.lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield  # closing the file releases the lock
        return
    if not url.startswith(("postgresql://", "postgresql+")):
        raise ValueError("expected journal:PATH, sqlite:///PATH or postgresql://... (the sweep locks need one of them)")
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    engine = sqlalchemy.create_engine(database_url(url), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": lock_key(name)})
            connection.commit()
            try:
                yield
            finally:
                connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": lock_key(name)})
                connection.commit()
    finally:
        engine.dispose()
