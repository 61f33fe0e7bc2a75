"""The sweeper's knobs (conf/hydra/sweeper/rookworld_optuna.yaml, `hydra.sweeper.*`), checked before any worker
starts: Sweeper, its staged sweep's Stages (Race, Confirm) and the storage's DbTimeouts.

A staged sweep runs every configuration on k paired seeds, rung by rung, races the best at the full horizon
against the baseline on added seeds, and confirms the survivors on fresh seeds on `confirm.pool`: the final
pool, which nothing else reads, or the test part (rookworld/sweep/staged/stages.py). Seeds are numbered from `first_seed`: the search uses the first `seeds`,
the race the first `race.max_seeds` (the search's among them), the confirmation the next `confirm.seeds`,
which no earlier stage used.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from rookworld.specs.rules import ConfigError, require, require_int
from rookworld.stats.paired import TESTS

KEY = "hydra.sweeper."
STAGES = KEY + "stages."
DIRECTIONS = ("maximize", "minimize")
CONFIRMATION_STAGE = "confirm"  # trial.tags.stage of a confirmation run (a tag: the final pool opens by rookworld/final_pool.py's grant alone)
CONFIRM_POOLS = ("final", "test")  # hydra.sweeper.stages.confirm.pool


def _alpha(value: float, key: str) -> None:
    require(0 < value < 1, key, value, "must be a number in (0, 1)")


def _test(value: str, key: str) -> None:
    require(value in TESTS, key, value, f"expected one of {', '.join(TESTS)}")


@dataclass(frozen=True)
class Race:
    top: int  # configurations raced (best search means), the baseline besides
    max_seeds: int  # seeds per raced configuration at most, the search's among them
    min_seeds: int  # rounds before the first drop
    alpha: float
    test: str
    ahead: int  # rounds enqueued beyond the current one, for idle workers

    def __post_init__(self):
        key = STAGES + "race."
        require_int(self.top, key + "top", 1)  # max_seeds and min_seeds: Stages checks them against its seeds
        _alpha(self.alpha, key + "alpha")
        _test(self.test, key + "test")
        require_int(self.ahead, key + "ahead", 0)


@dataclass(frozen=True)
class Confirm:
    seeds: int  # fresh seeds for each finalist and the baseline
    finalists: int  # race survivors confirmed (Holm over them)
    alpha: float
    test: str
    pool: str  # the held-out part it scores: final (read by nothing else) | test

    def __post_init__(self):
        key = STAGES + "confirm."
        require(self.pool in CONFIRM_POOLS, key + "pool", self.pool, f"expected one of {', '.join(CONFIRM_POOLS)}")
        require_int(self.seeds, key + "seeds", 2)
        require_int(self.finalists, key + "finalists", 1)
        _alpha(self.alpha, key + "alpha")
        _test(self.test, key + "test")


@dataclass(frozen=True)
class Stages:
    enabled: bool
    seeds: int
    first_seed: int
    rungs: tuple[int, ...] | None  # None: one rung, the full horizon (`steps`; with_horizon() fills it in)
    eta: int
    baseline: tuple[str, ...]
    baseline_ahead: bool  # the baseline's race and confirmation runs start while the search's last ones run
    race: Race
    confirm: Confirm
    checkpoint_dir: str

    def __post_init__(self):
        require_int(self.seeds, STAGES + "seeds", 1)
        require_int(self.first_seed, STAGES + "first_seed", 0)
        require_int(self.eta, STAGES + "eta", 2)
        rungs = list(self.rungs) if self.rungs is not None else None
        require(rungs is None or (len(rungs) >= 1 and all(isinstance(r, int) and not isinstance(r, bool) and r >= 1
                                                          for r in rungs)),
                STAGES + "rungs", rungs, "expected a list of step counts >= 1, e.g. [100, 200, 400], or null")
        for low, high in zip(rungs or [], (rungs or [])[1:]):
            require(high == low * self.eta, STAGES + "rungs", rungs,
                    f"each rung must be eta = {self.eta} times the one before (successive halving)")
        require(all(isinstance(o, str) and "=" in o for o in self.baseline), STAGES + "baseline", list(self.baseline),
                "expected a list of overrides (key=value), e.g. [experiment=grpo_rookworld_tiny]")
        require(bool(self.checkpoint_dir), STAGES + "checkpoint_dir", self.checkpoint_dir,
                "expected a folder for the rungs' checkpoints")
        race = self.race
        require_int(race.max_seeds, STAGES + "race.max_seeds", self.seeds)
        require_int(race.min_seeds, STAGES + "race.min_seeds", 2)
        require(race.min_seeds <= race.max_seeds, STAGES + "race.min_seeds", race.min_seeds,
                f"must be <= race.max_seeds = {race.max_seeds}")

    def with_horizon(self, steps: Any) -> Stages:
        """The rungs checked against the trial config's `steps` (the full horizon): the last rung is it."""
        if self.rungs is None:
            return replace(self, rungs=(int(steps),))
        if self.rungs[-1] != steps:
            raise ConfigError(f"{STAGES}rungs={list(self.rungs)!r}: the last rung must be the full horizon, steps = {steps}")
        return self

    @property
    def horizon(self) -> int:
        assert self.rungs is not None
        return self.rungs[-1]

    def search_seeds(self) -> tuple[int, ...]:
        return tuple(range(self.first_seed, self.first_seed + self.seeds))

    def race_seeds(self) -> tuple[int, ...]:
        return tuple(range(self.first_seed, self.first_seed + self.race.max_seeds))

    def confirm_seeds(self) -> tuple[int, ...]:
        start = self.first_seed + self.race.max_seeds
        return tuple(range(start, start + self.confirm.seeds))


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


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


@dataclass(frozen=True)
class Sweeper:
    study_name: str
    storage: str
    direction: str | tuple[str, ...]  # one direction (a list of one is taken apart), lower case
    n_trials: int
    n_jobs: int
    max_failure_rate: float
    stale_retries: int
    heartbeat_interval_s: float
    grace_period_s: float
    max_worker_restarts: int
    accept_fixed_changes: bool  # join a study whose first launch gave other fixed overrides
    connect_timeout_s: float
    statement_timeout_s: float
    lock_wait_s: float
    lock_lease_s: float
    sampler: dict[str, Any]
    params: dict[str, Any] | None
    validate: str | None
    stages: Stages | None  # None: no stages (one seed per trial), or stages.enabled false

    def __post_init__(self):
        require(bool(self.study_name), KEY + "study_name", self.study_name, "must name the study (one per sweep)")
        require(bool(self.storage), KEY + "storage", self.storage,
                "expected a storage URL (sweep_storage=journal | sqlite | postgresql)")
        direction = self.direction
        if isinstance(direction, tuple):
            require(len(direction) == 1, KEY + "direction", list(direction), "one direction: the objective is one float")
            direction = direction[0]
        require(str(direction).lower() in DIRECTIONS, KEY + "direction", direction, "expected maximize or minimize")
        object.__setattr__(self, "direction", str(direction).lower())
        for knob, least in (("n_trials", 0), ("n_jobs", 1), ("stale_retries", 0), ("max_worker_restarts", 0)):
            require_int(getattr(self, knob), KEY + knob, least)
        rate = self.max_failure_rate
        require(0 <= rate <= 1, KEY + "max_failure_rate", rate, "must be a number in [0, 1]")
        beat, grace = self.heartbeat_interval_s, self.grace_period_s
        require(beat > 0, KEY + "heartbeat_interval_s", beat, "must be a number > 0")
        require(grace >= 2 * beat, KEY + "grace_period_s", grace,
                f"must be a number >= 2 x heartbeat_interval_s = {2 * beat:g}")
        for knob in TIMEOUT_KNOBS:
            require(getattr(self, knob) > 0, KEY + knob, getattr(self, knob), "must be a number > 0")
        require("_target_" in self.sampler, KEY + "sampler", self.sampler,
                "expected a sampler config (hydra/sweeper/sampler=tpe | random | ...)")
        if self.stages is not None and not self.stages.enabled:
            object.__setattr__(self, "stages", None)
        require(self.stages is None or self.direction == "maximize", KEY + "direction", direction,
                "a staged sweep maximizes eval/score (its race and verdict test for higher scores)")

    @property
    def timeouts(self) -> DbTimeouts:
        return DbTimeouts(*(float(getattr(self, knob)) for knob in TIMEOUT_KNOBS))

    def search_params(self) -> dict[str, str]:
        """`params`: each swept key's sweep expression."""
        return {str(key): str(value) for key, value in (self.params or {}).items()}
