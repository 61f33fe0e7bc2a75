"""Tracking settings from a conf/tracking node, the store URI resolution, and TrackingError."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

BACKENDS = ("mlflow", "none")
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
TRACKING_CONFIG = CONF_DIR / "tracking" / "mlflow.yaml"  # its defaults, for the CLIs outside Hydra


class TrackingError(RuntimeError):
    """A tracking store that cannot be used; the message is one line."""


SQLITE = "sqlite:///"  # the URI prefix of a sqlite store: a file path follows


@dataclass(frozen=True)
class TrackingSettings:
    backend: str
    uri: str
    experiment: str
    run_name: str | None
    artifact_location: str | None
    flush_interval_s: float
    param_value_max: int
    connect_timeout_s: float
    sqlite_template: str | None  # a new sqlite store is copied from an empty one kept here (None: migrated)

    @classmethod
    def from_config(cls, tracking: DictConfig, base_dir: str) -> TrackingSettings:
        """Settings of `tracking` (a conf/tracking node); a relative sqlite path resolves against base_dir."""
        backend = str(tracking.backend)
        if backend not in BACKENDS:
            raise ValueError(f"tracking.backend must be one of {BACKENDS}, got {backend!r}")
        if backend == "none":
            return cls(backend, "", "", None, None, 0.0, 0, 0.0, None)
        return cls(
            backend=backend,
            uri=resolve_uri(str(tracking.uri), base_dir),
            experiment=str(tracking.experiment),
            run_name=tracking.run_name,
            artifact_location=tracking.artifact_location,
            flush_interval_s=float(tracking.flush_interval_s),
            param_value_max=int(tracking.param_value_max),
            connect_timeout_s=float(tracking.connect_timeout_s),
            sqlite_template=tracking.sqlite_template,
        )


def resolve_uri(uri: str, base_dir: str) -> str:
    """Make a relative `sqlite:///file.db` absolute (against `base_dir`); other URIs unchanged."""
    if not uri.startswith(SQLITE) or uri == SQLITE + ":memory:":
        return uri
    path = uri[len(SQLITE) :]
    if Path(path).is_absolute():
        return uri
    return SQLITE + str(Path(base_dir, path).resolve())


def absolute_path(path: str, base: str | None) -> Path:
    p = Path(path)
    return p if p.is_absolute() else Path(base or os.getcwd()) / p


def hydra_base_dir() -> str:
    """The directory relative paths are resolved against: Hydra's launch cwd, else the cwd."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        cwd = OmegaConf.select(HydraConfig.get(), "runtime.cwd", default=None)
        if cwd:
            return str(cwd)
    return os.getcwd()
