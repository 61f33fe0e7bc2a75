"""conf/tracking/: where a run is logged, one spec per backend (tracking=mlflow|none). rookworld/tracking/
reads the same node for its settings; the library reads only `log_checkpoint`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rookworld.specs.rules import is_number, require, require_bool, require_option

BACKENDS = ("mlflow", "none")


@dataclass(frozen=True)
class NoTracking:
    backend: str
    run_link: None  # nothing is filed (rookworld/app/hooks.py reads it)
    log_checkpoint: ClassVar[bool] = False  # there is no store to upload a checkpoint to

    def __post_init__(self):
        require_option("tracking", "backend", self.backend, BACKENDS, "none")


@dataclass(frozen=True)
class MLflowTracking:
    backend: str
    uri: str
    experiment: str
    run_name: str | None
    artifact_location: str | None
    log_checkpoint: bool
    flush_interval_s: float
    param_value_max: int
    connect_timeout_s: float
    sqlite_template: str | None  # where the migrated empty sqlite store is kept (rookworld/tracking/sqlite_template.py)
    summary_top_k: int
    run_link: dict[str, Any] | None  # where the run is filed: a factory by _target_ (rookworld/app/hooks.py)

    def __post_init__(self):
        require_option("tracking", "backend", self.backend, BACKENDS, "mlflow")
        require_bool(self.log_checkpoint, "tracking.log_checkpoint")
        for key in ("flush_interval_s", "connect_timeout_s"):
            value = getattr(self, key)
            require(is_number(value) and value > 0, f"tracking.{key}", value, "must be > 0")
        require(isinstance(self.param_value_max, int) and self.param_value_max >= 4, "tracking.param_value_max",
                self.param_value_max, "must be an integer >= 4 (room for '...')")


Tracking = NoTracking | MLflowTracking
