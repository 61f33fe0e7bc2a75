"""Hydra's sweep grammar as Optuna distributions, through Hydra's public override parser: choice(...) ->
categorical, interval(a, b) -> float or int, tag(log, interval(a, b)) -> log scale, range(...) -> stepped (a
float range whose endpoints or step a float cannot hold exactly, and a shuffled or transformed one: its
values as a choice). An override that sweeps nothing is fixed; a deletion (~key) is passed on as written."""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from math import ceil, ulp
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, Transformer
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution


def params_from_overrides(lines: list[str]) -> tuple[dict[str, BaseDistribution], dict[str, Any], list[str]]:
    """The searched params' distributions, the fixed params (key -> value as written) and the deletions."""
    distributions: dict[str, BaseDistribution] = {}
    fixed: dict[str, Any] = {}
    deletions: list[str] = []
    for override in OverridesParser.create().parse_overrides(lines):
        if override.is_delete():
            deletions.append(override.input_line)
            continue
        value = distribution_of(override)
        target = distributions if isinstance(value, BaseDistribution) else fixed
        target[override.get_key_element()] = value
    return distributions, fixed, deletions


def distribution_of(override: Override) -> BaseDistribution | str:
    """The distribution a sweep override searches, or a plain override's value as written."""
    if not override.is_sweep_override():
        return override.get_value_element_as_str()
    if override.is_choice_sweep():
        return _as_choice(override)
    if override.is_range_sweep():
        return _range(override)
    if override.is_interval_sweep():
        value = override.value()
        log = "log" in value.tags
        if isinstance(value.start, int) and isinstance(value.end, int):
            return IntDistribution(int(value.start), int(value.end), log=log)
        return FloatDistribution(value.start, value.end, log=log)
    raise ValueError(f"{override.input_line}: not a sweep Optuna can search")


def _as_choice(override: Override) -> CategoricalDistribution:
    choices = list(override.sweep_iterator(transformer=Transformer.encode))
    for choice in choices:
        if not isinstance(choice, (str, int, float, bool, type(None))):
            raise ValueError(f"A choice sweep expects str, int, float, bool, or None type. Got {type(choice)}.")
    return CategoricalDistribution(choices)


def _range(override: Override) -> BaseDistribution:
    sweep = override.value()
    if sweep.step == 0:
        raise ValueError("An Optuna range sweep requires a nonzero step.")
    if sweep.shuffle or sweep.transformers:
        return _as_choice(override)
    values = sweep.range()
    if isinstance(values, range):
        if not values:
            raise ValueError("An Optuna range sweep must contain at least one value.")
        low, high = sorted((values[0], values[-1]))
        return IntDistribution(low, high, step=abs(values.step))
    count = ceil((Fraction(values.stop) - Fraction(values.start)) / Fraction(values.step))
    if count <= 0:
        raise ValueError("An Optuna range sweep must contain at least one value.")
    last = values.start + (count - 1) * values.step  # Optuna includes both ends; Hydra's stop is exclusive
    low, high = sorted((float(values.start), float(last)))
    step = float(abs(values.step))
    exact = (Decimal(str(low)) == min(values.start, last) and Decimal(str(high)) == max(values.start, last)
             and Decimal(str(step)) == abs(values.step) and (step >= max(ulp(low), ulp(high)) or low == high))
    return FloatDistribution(low, high, step=step) if exact else _as_choice(override)
