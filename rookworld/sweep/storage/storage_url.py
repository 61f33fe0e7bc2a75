"""Optuna storage URLs: `journal:PATH`, `sqlite:///PATH` or `postgresql://...` (docs/sweeps.md).

A URL may hold a password (`postgresql://user:PASSWORD@host/db`): `masked(url)` is the URL to show,
`redacted(text, url)` any message with that password blanked out.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from rookworld.config import require
from rookworld.tracking import CONF_DIR, absolute_path, resolve_uri

SWEEPER_CONFIG = CONF_DIR / "hydra" / "sweeper" / "rookworld_optuna.yaml"

JOURNAL_PREFIX = "journal:"
SQLITE_PREFIX = "sqlite:///"
POSTGRES_DRIVER = "psycopg2"  # `pip install 'rookworld[postgresql]'` (psycopg2-binary)
_PASSWORD = re.compile(r"^(?P<head>[\w+.-]+://[^:/@]*:)(?P<password>.*)@(?=[^@]*$)")  # up to the last @
MASK = "***"


def storage_file(url: str, base_dir: str) -> Path | None:
    """The file of a sqlite or journal storage (absolute); None for a database server."""
    if url.startswith(JOURNAL_PREFIX):
        return absolute_path(url[len(JOURNAL_PREFIX) :], base_dir)
    url = resolve_uri(url, base_dir)
    return Path(url[len(SQLITE_PREFIX) :]) if url.startswith(SQLITE_PREFIX) else None


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


@dataclass(frozen=True)
class DbTimeouts:
    """How long a database storage may keep a sweep waiting (the sweeper's PostgreSQL knobs)."""

    connect_s: float  # to connect (and log in)
    statement_s: float  # one statement of Optuna's
    lock_wait_s: float  # to get the study's lock
    lock_lease_s: float  # a lock holder silent this long (a frozen or lost node) loses the lock

    def connect_args(self) -> dict[str, Any]:
        """psycopg2 arguments of every storage connection: a bounded connect, statement timeout, keepalives."""
        return {"connect_timeout": max(2, math.ceil(self.connect_s)),  # libpq's floor is 2 s
                "options": f"-c statement_timeout={_ms(self.statement_s)} {self._dead_peer_options()}",
                **self._keepalives()}

    def lock_connect_args(self) -> dict[str, Any]:
        """The lock's own connection: waits for the lock up to lock_wait_s; its session ends once it sits idle
        in its transaction for lock_lease_s (the holder refreshes it while it lives)."""
        return {"connect_timeout": max(2, math.ceil(self.connect_s)),
                "options": f"-c lock_timeout={_ms(self.lock_wait_s)} "
                           f"-c idle_in_transaction_session_timeout={_ms(self.lock_lease_s)} {self._dead_peer_options()}",
                **self._keepalives()}

    def _keepalives(self) -> dict[str, Any]:
        idle = max(1, math.ceil(self.lock_lease_s / 3))
        return {"keepalives": 1, "keepalives_idle": idle, "keepalives_interval": idle, "keepalives_count": 3}

    def _dead_peer_options(self) -> str:
        """The server drops a connection whose peer stopped answering (a lost node) after lock_lease_s."""
        idle = max(1, math.ceil(self.lock_lease_s / 3))
        return (f"-c tcp_keepalives_idle={idle} -c tcp_keepalives_interval={idle} -c tcp_keepalives_count=3 "
                f"-c tcp_user_timeout={_ms(self.lock_lease_s)}")


TIMEOUT_KNOBS = ("connect_timeout_s", "statement_timeout_s", "lock_wait_s", "lock_lease_s")


def parse_timeouts(raw: dict[str, Any]) -> DbTimeouts:
    """The PostgreSQL timeouts among the sweeper's knobs, checked."""
    for knob in TIMEOUT_KNOBS:
        value = raw[knob]
        require(isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0, "hydra.sweeper." + knob, value,
                "must be a number > 0")
    return DbTimeouts(*(float(raw[knob]) for knob in TIMEOUT_KNOBS))


def default_timeouts() -> DbTimeouts:
    """The timeouts conf/hydra/sweeper/rookworld_optuna.yaml sets (for tools that read a study outside a sweep)."""
    return parse_timeouts(OmegaConf.to_container(OmegaConf.load(SWEEPER_CONFIG)))


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))
