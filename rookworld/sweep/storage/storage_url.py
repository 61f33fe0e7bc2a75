"""Optuna storage URLs: `journal:PATH`, `sqlite:///PATH` or `postgresql://...` (docs/sweeps.md).

A URL may hold a password (`postgresql://user:PASSWORD@host/db`): `masked(url)` is the URL to show,
`redacted(text, url)` any message with that password blanked out.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from rookworld.specs.sweep import TIMEOUT_KNOBS, DbTimeouts
from rookworld.tracking import CONF_DIR, SQLITE, absolute_path, resolve_uri

SWEEPER_CONFIG = CONF_DIR / "hydra" / "sweeper" / "rookworld_optuna.yaml"

JOURNAL_PREFIX = "journal:"
POSTGRES_DRIVER = "psycopg2"  # `pip install 'rookworld[postgresql]'` (psycopg2-binary)
_PASSWORD = re.compile(r"^(?P<head>[\w+.-]+://[^:/@]*:)(?P<password>.*)@(?=[^@]*$)")  # up to the last @
MASK = "***"


def storage_file(url: str, base_dir: str) -> Path | None:
    """The file of a sqlite or journal storage (absolute); None for a database server."""
    if url.startswith(JOURNAL_PREFIX):
        return absolute_path(url[len(JOURNAL_PREFIX) :], base_dir)
    url = resolve_uri(url, base_dir)
    return Path(url[len(SQLITE) :]) if url.startswith(SQLITE) else None


def is_database(url: str) -> bool:
    return url.startswith(("postgresql://", "postgresql+"))


def database_url(url: str) -> str:
    """`postgresql://` pinned to the driver we document (SQLAlchemy 2.1 would otherwise pick psycopg 3)."""
    return f"postgresql+{POSTGRES_DRIVER}://" + url[len("postgresql://") :] if url.startswith("postgresql://") else url


def password(url: str) -> str | None:
    found = _PASSWORD.match(url)
    return found["password"] if found and found["password"] else None


def masked(url: str) -> str:
    """The URL with its password, if any, replaced by ***."""
    return _PASSWORD.sub(lambda m: f"{m['head']}{MASK}@", url, count=1) if password(url) else url


def redacted(text: str, url: str) -> str:
    """`text` with the URL's password, wherever it appears, replaced by ***."""
    secret = password(url)
    return text.replace(secret, MASK) if secret else text


def default_timeouts() -> DbTimeouts:
    """The timeouts conf/hydra/sweeper/rookworld_optuna.yaml sets (for tools that read a study outside a sweep)."""
    return timeouts_of(OmegaConf.load(SWEEPER_CONFIG))


def timeouts_of(sweeper: Any) -> DbTimeouts:
    """The DbTimeouts of the sweeper's knobs (`hydra.sweeper`, checked by its Sweeper spec when the sweep began)."""
    return DbTimeouts(*(float(sweeper[knob]) for knob in TIMEOUT_KNOBS))
