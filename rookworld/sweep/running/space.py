"""The search space of a sweep: `hydra.sweeper.params` and the command line, as Optuna distributions.

Parsing is distributions.py's (`params_from_overrides`: choice(...) -> categorical,
interval(a, b) -> float or int, tag(log, interval(a, b)) -> log scale, range(...) -> stepped).
Plain overrides (`sweeps=smoke`, `steps=2`) are fixed: every trial gets them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hydra.utils import instantiate
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from rookworld.app.config import ConfigError
from rookworld.specs.inert import same
from rookworld.specs.rules import is_number
from rookworld.sweep.running.distributions import params_from_overrides


@dataclass(frozen=True)
class SearchSpace:
    distributions: dict[str, BaseDistribution]
    fixed: tuple[str, ...]  # overrides every trial gets

    @classmethod
    def parse(cls, params: dict[str, str], arguments: list[str]) -> SearchSpace:
        lines = [f"{k}={v}" for k, v in params.items()] + list(arguments)
        try:
            distributions, fixed_params, fixed_overrides = params_from_overrides(lines)
        except Exception as error:  # the grammar's own errors: one line naming the range at fault
            raise ConfigError(f"{_culprit(params, arguments)}: {_reason(error)}") from error
        for name in fixed_params:
            distributions.pop(name, None)  # fixed on the command line: not searched
        fixed = tuple(f"{k}={v}" for k, v in fixed_params.items()) + tuple(fixed_overrides)
        return cls(distributions, fixed)

    def overrides(self, params: dict[str, Any]) -> list[str]:
        """A trial's overrides: the fixed ones, then its sampled params."""
        return [*self.fixed, *self.param_overrides(params)]

    @staticmethod
    def param_overrides(params: dict[str, Any]) -> list[str]:
        """Sampled params as overrides."""
        return [f"{k}={_override_value(v)}" for k, v in params.items()]

    def suggest(self, trial: Any) -> dict[str, Any]:
        """Sample every param on an asked trial (an enqueued trial's fixed params are taken as they are)."""
        for name, d in self.distributions.items():
            if isinstance(d, CategoricalDistribution):
                trial.suggest_categorical(name, d.choices)
            elif isinstance(d, IntDistribution):
                trial.suggest_int(name, d.low, d.high, step=d.step, log=d.log)
            else:
                assert isinstance(d, FloatDistribution)
                trial.suggest_float(name, d.low, d.high, step=d.step, log=d.log)
        return trial.params

    def probes(self) -> list[dict[str, Any]]:
        """Param sets that together touch every choice and both ends of every range (for validation)."""
        count = max([2] + [len(d.choices) for d in self.distributions.values()
                           if isinstance(d, CategoricalDistribution)])
        return [{name: _probe_value(d, i) for name, d in self.distributions.items()} for i in range(count)]

    def takes(self) -> dict[str, Callable[[Any], bool]]:
        """Each searched key and whether its trials can draw a value: one of its choices, an integer or stepped value
        in its range (a continuous range draws no one value but by chance)."""
        return {name: functools.partial(_holds, d) for name, d in self.distributions.items()}

    def log_scale(self) -> tuple[str, ...]:
        return tuple(k for k, d in self.distributions.items() if getattr(d, "log", False))

    def grid(self) -> dict[str, list[Any]]:
        """The grid sampler's search space: every param must be a choice."""
        for name, d in self.distributions.items():
            if not isinstance(d, CategoricalDistribution):
                raise ConfigError(f"hydra.sweeper.params.{name}={d}: the grid sampler needs choice(...) params")
        return {name: list(d.choices) for name, d in self.distributions.items()}


def _culprit(params: dict[str, str], arguments: list[str]) -> str:
    """The one range that does not parse, as the user wrote it: a command-line override, else the sweep's
    `hydra.sweeper.params.<key>` (a command-line range replaces the sweep file's range of its key)."""
    given = {line.partition("=")[0]: line for line in arguments}
    lines = [given.get(k, f"hydra.sweeper.params.{k}={v}") for k, v in params.items()]
    lines += [line for line in arguments if line not in lines]
    for line in lines:
        value = line.partition("=")[2]
        try:
            params_from_overrides([f"{line.partition('=')[0].removeprefix('hydra.sweeper.params.')}={value}"])
        except Exception:  # noqa: BLE001 - this is the line at fault; the caller raises the error
            return line
    return f"hydra.sweeper.params={params}"


def _reason(error: Exception) -> str:
    """The error on one line, without Hydra's "Error when parsing ..." header and documentation link."""
    lines = [line for line in str(error).splitlines()
             if not line.startswith(("Error when parsing", "Error parsing override", "See https"))]
    return " ".join(" ".join(lines or [str(error)]).split())


def _probe_value(distribution: BaseDistribution, index: int) -> Any:
    if isinstance(distribution, CategoricalDistribution):
        return distribution.choices[index % len(distribution.choices)]
    assert isinstance(distribution, (FloatDistribution, IntDistribution))
    return distribution.low if index % 2 == 0 else distribution.high


def _holds(distribution: BaseDistribution, value: Any) -> bool:
    if isinstance(distribution, CategoricalDistribution):
        return any(same(choice, value) for choice in distribution.choices)
    assert isinstance(distribution, (FloatDistribution, IntDistribution))
    if not is_number(value) or not distribution.low <= value <= distribution.high:
        return False
    step = 1 if isinstance(distribution, IntDistribution) else distribution.step
    return step is not None and ((value - distribution.low) / step).is_integer()


def _override_value(value: Any) -> str:
    return "null" if value is None else str(value)


def make_sampler(config: dict[str, Any], seed_offset: int, space: SearchSpace) -> Any:
    """The sampler of `hydra.sweeper.sampler`, its seed (if any) shifted by `seed_offset`."""
    config = dict(config)
    if config.get("seed") is not None:
        config["seed"] = int(config["seed"]) + seed_offset
    try:
        sampler = instantiate(config, _execution_whitelist_=("hydra_plugins.hydra_optuna_sweeper.*",
                                                              "optuna.samplers.*"))
    except Exception as error:
        raise ConfigError(f"hydra.sweeper.sampler={config}: {' '.join(str(error).split())}"[:600]) from error
    if isinstance(sampler, functools.partial):  # the grid sampler takes the search space
        sampler = sampler(space.grid())
    return sampler
