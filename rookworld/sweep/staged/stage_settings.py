"""The knobs of a staged sweep (`hydra.sweeper.stages`, conf/hydra/sweeper/rookworld_optuna.yaml), checked.

A staged sweep runs every configuration on k paired seeds, rung by rung, races the best at the full
horizon against the baseline on added seeds, and confirms the survivors on fresh seeds on the test
positions (rookworld/sweep/staged/stages.py). Seeds are numbered from `first_seed`: the search uses the first
`seeds`, the race the first `race.max_seeds` (the search's among them), the confirmation the next
`confirm.seeds`, which no earlier stage used. Every rule fails with the one-line ConfigError.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rookworld.config import ConfigError, require
from rookworld.stats.paired import TESTS

KEY = "hydra.sweeper.stages."


def _integer(raw: dict[str, Any], name: str, least: int, prefix: str = KEY) -> int:
    value = raw[name]
    require(isinstance(value, int) and not isinstance(value, bool) and value >= least, prefix + name, value,
            f"must be an integer >= {least}")
    return value


def _alpha(raw: dict[str, Any], prefix: str) -> float:
    value = raw["alpha"]
    require(isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1, prefix + "alpha",
            value, "must be a number in (0, 1)")
    return float(value)


def _test(raw: dict[str, Any], prefix: str) -> str:
    require(raw["test"] in TESTS, prefix + "test", raw["test"], f"expected one of {', '.join(TESTS)}")
    return str(raw["test"])


def _keys(raw: Any, prefix: str, names: tuple[str, ...]) -> dict[str, Any]:
    require(isinstance(raw, dict), prefix.rstrip("."), raw, "expected a mapping")
    unknown = sorted(set(raw) - set(names))
    require(not unknown, prefix.rstrip("."), unknown, f"unknown key(s): expected {', '.join(names)}")
    missing = sorted(set(names) - set(raw))
    require(not missing, prefix.rstrip("."), missing, "missing key(s)")
    return raw


@dataclass(frozen=True)
class RaceSettings:
    top: int  # configurations raced (best search means), the baseline besides
    max_seeds: int  # seeds per raced configuration at most, the search's among them
    min_seeds: int  # rounds before the first drop
    alpha: float
    test: str
    ahead: int  # rounds enqueued beyond the current one, for idle workers

    @classmethod
    def parse(cls, raw: Any, seeds: int) -> RaceSettings:
        prefix = KEY + "race."
        raw = _keys(raw, prefix, ("top", "max_seeds", "min_seeds", "alpha", "test", "ahead"))
        top = _integer(raw, "top", 1, prefix)
        max_seeds = _integer(raw, "max_seeds", seeds, prefix)
        min_seeds = _integer(raw, "min_seeds", 2, prefix)
        require(min_seeds <= max_seeds, prefix + "min_seeds", min_seeds, f"must be <= race.max_seeds = {max_seeds}")
        return cls(top, max_seeds, min_seeds, _alpha(raw, prefix), _test(raw, prefix), _integer(raw, "ahead", 0, prefix))


@dataclass(frozen=True)
class ConfirmSettings:
    seeds: int  # fresh seeds for each finalist and the baseline
    finalists: int  # race survivors confirmed (Holm over them)
    alpha: float
    test: str

    @classmethod
    def parse(cls, raw: Any) -> ConfirmSettings:
        prefix = KEY + "confirm."
        raw = _keys(raw, prefix, ("seeds", "finalists", "alpha", "test"))
        return cls(_integer(raw, "seeds", 2, prefix), _integer(raw, "finalists", 1, prefix), _alpha(raw, prefix),
                   _test(raw, prefix))


@dataclass(frozen=True)
class StageSettings:
    enabled: bool
    seeds: int
    first_seed: int
    rungs: tuple[int, ...] | None  # None: one rung, the full horizon (`steps`; with_horizon() fills it in)
    eta: int
    baseline: tuple[str, ...]
    baseline_ahead: bool  # the baseline's race and confirmation runs start while the search's last ones run
    race: RaceSettings
    confirm: ConfirmSettings
    checkpoint_dir: str

    NAMES = ("enabled", "seeds", "first_seed", "rungs", "eta", "baseline", "baseline_ahead", "race", "confirm",
             "checkpoint_dir")

    @classmethod
    def parse(cls, node: Any) -> StageSettings | None:
        """`hydra.sweeper.stages`; None when staging is off."""
        raw = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
        raw = _keys(raw, KEY, cls.NAMES)
        enabled = raw["enabled"]
        require(isinstance(enabled, bool), KEY + "enabled", enabled, "must be true or false")
        seeds = _integer(raw, "seeds", 1)
        first_seed = _integer(raw, "first_seed", 0)
        eta = _integer(raw, "eta", 2)
        rungs = raw["rungs"]
        if rungs is not None:
            require(isinstance(rungs, list) and len(rungs) >= 1
                    and all(isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in rungs),
                    KEY + "rungs", rungs, "expected a list of step counts >= 1, e.g. [100, 200, 400], or null")
            for low, high in zip(rungs, rungs[1:]):
                require(high == low * eta, KEY + "rungs", rungs,
                        f"each rung must be eta = {eta} times the one before (successive halving)")
            rungs = tuple(rungs)
        baseline = raw["baseline"]
        require(isinstance(baseline, list) and all(isinstance(o, str) and "=" in o for o in baseline),
                KEY + "baseline", baseline, "expected a list of overrides (key=value), e.g. [experiment=grpo_rookworld_tiny]")
        ahead = raw["baseline_ahead"]
        require(isinstance(ahead, bool), KEY + "baseline_ahead", ahead, "must be true or false")
        directory = raw["checkpoint_dir"]
        require(isinstance(directory, str) and bool(directory), KEY + "checkpoint_dir", directory,
                "expected a folder for the rungs' checkpoints")
        settings = cls(enabled, seeds, first_seed, rungs, eta, tuple(baseline), ahead, RaceSettings.parse(raw["race"], seeds),
                       ConfirmSettings.parse(raw["confirm"]), directory)
        return settings if enabled else None

    def with_horizon(self, steps: Any) -> StageSettings:
        """The rungs checked against the trial config's `steps` (the full horizon): the last rung is it."""
        if self.rungs is None:
            return replace(self, rungs=(int(steps),))
        if self.rungs[-1] != steps:
            raise ConfigError(f"{KEY}rungs={list(self.rungs)!r}: the last rung must be the full horizon, steps = {steps}")
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
