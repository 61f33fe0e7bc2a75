"""Optuna storage URLs: `journal:PATH`, `sqlite:///PATH` or `postgresql://...` (docs/sweeps.md)."""
from __future__ import annotations

from pathlib import Path

from rookworld.tracking import absolute_path, resolve_uri

JOURNAL_PREFIX = "journal:"
SQLITE_PREFIX = "sqlite:///"
POSTGRES_DRIVER = "psycopg2"  # `pip install 'rookworld[postgresql]'` (psycopg2-binary)


def storage_file(url: str, base_dir: str) -> Path | None:
    """The file of a sqlite or journal storage (absolute); None for a database server."""
    if url.startswith(JOURNAL_PREFIX):
        return absolute_path(url[len(JOURNAL_PREFIX) :], base_dir)
    url = resolve_uri(url, base_dir)
    return Path(url[len(SQLITE_PREFIX) :]) if url.startswith(SQLITE_PREFIX) else None


def database_url(url: str) -> str:
    """`postgresql://` pinned to the driver we document (SQLAlchemy 2.1 would otherwise pick psycopg 3)."""
    return f"postgresql+{POSTGRES_DRIVER}://" + url[len("postgresql://") :] if url.startswith("postgresql://") else url
