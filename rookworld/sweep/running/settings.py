"""The sweeper's knobs (conf/hydra/sweeper/rookworld_optuna.yaml), validated before any worker starts.

Every rule fails with rookworld.config's one-line ConfigError `key=value: rule`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from rookworld.config import ConfigError, require
from rookworld.sweep.staged.stage_settings import StageSettings
from rookworld.sweep.storage.storage_url import DbTimeouts, parse_timeouts
from rookworld.sweep.report.summary import DIRECTIONS


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class SweepSettings:
    study_name: str
    storage: str
    direction: str
    n_trials: int
    n_jobs: int
    max_failure_rate: float
    stale_retries: int
    heartbeat_interval_s: float
    grace_period_s: float
    max_worker_restarts: int
    timeouts: DbTimeouts
    sampler: dict[str, Any]
    params: dict[str, str]
    validate: str | None
    stages: StageSettings | None = None  # None: no stages (one seed per trial)

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> SweepSettings:
        """The sweeper's constructor arguments, checked; the first bad one raises."""
        key = "hydra.sweeper."
        name, storage, direction = raw["study_name"], raw["storage"], raw["direction"]
        require(isinstance(name, str) and bool(name), key + "study_name", name, "must name the study (one per sweep)")
        require(isinstance(storage, str) and bool(storage), key + "storage", storage,
                "expected a storage URL (sweep_storage=journal | sqlite | postgresql)")
        if isinstance(direction, (list, ListConfig)):
            require(len(direction) == 1, key + "direction", direction, "one direction: the objective is one float")
            direction = direction[0]
        require(str(direction).lower() in DIRECTIONS, key + "direction", direction, "expected maximize or minimize")
        for knob, least in (("n_trials", 0), ("n_jobs", 1), ("stale_retries", 0), ("max_worker_restarts", 0)):
            require(is_integer(raw[knob]) and raw[knob] >= least, key + knob, raw[knob],
                    f"must be an integer >= {least}")
        rate = raw["max_failure_rate"]
        require(is_number(rate) and 0 <= rate <= 1, key + "max_failure_rate", rate, "must be a number in [0, 1]")
        beat, grace = raw["heartbeat_interval_s"], raw["grace_period_s"]
        require(is_number(beat) and beat > 0, key + "heartbeat_interval_s", beat, "must be a number > 0")
        require(is_number(grace) and grace >= 2 * beat, key + "grace_period_s", grace,
                f"must be a number >= 2 x heartbeat_interval_s = {2 * beat:g}")
        timeouts = parse_timeouts(raw)
        sampler, params, validate = raw["sampler"], raw["params"], raw["validate"]
        require(isinstance(sampler, DictConfig) and "_target_" in sampler, key + "sampler", sampler,
                "expected a sampler config (hydra/sweeper/sampler=tpe | random | ...)")
        require(params is None or isinstance(params, DictConfig), key + "params", params,
                "expected a mapping key: sweep expression")
        require(validate is None or isinstance(validate, str), key + "validate", validate,
                "expected a dotted function path or null")
        stages = StageSettings.parse(raw["stages"]) if raw.get("stages") is not None else None
        require(stages is None or str(direction).lower() == "maximize", key + "direction", direction,
                "a staged sweep maximizes eval/score (its race and verdict test for higher scores)")
        return cls(name, storage, str(direction).lower(), raw["n_trials"], raw["n_jobs"], float(rate),
                   raw["stale_retries"], float(beat), float(grace), raw["max_worker_restarts"], timeouts,
                   _container(sampler),
                   {str(k): str(v) for k, v in (_container(params) if params is not None else {}).items()},
                   validate, stages)


def _container(node: DictConfig) -> dict[str, Any]:
    try:
        value = OmegaConf.to_container(node, resolve=True)
    except Exception as error:  # an interpolation that does not resolve
        raise ConfigError(f"hydra.sweeper: {error}".splitlines()[0]) from error
    assert isinstance(value, dict)
    return value
