"""The rule helpers every spec uses: a bad value raises ConfigError("key=value: rule"), which the entry
points print as one line `rookworld: error: key=value: rule` and exit 2 (rookworld/app/errors.py)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch loads where a device is checked: a sweep's launcher and a refused command never need it
    import torch


class ConfigError(ValueError):
    """A config value the run cannot start with; the message names the key and the value."""


def require(ok: bool, key: str, value, rule: str) -> None:
    """Raise ConfigError("key=value: rule") unless ok."""
    if not ok:
        raise ConfigError(f"{key}={value!r}: {rule}")


def one_of(key: str, value, options: tuple) -> None:
    require(value in options, key, value, f"expected one of {', '.join(options)}")


def require_option(group: str, key: str, value: str, options: tuple, expected: str) -> None:
    """An option's own name field (e.g. kl.kind) names that option: a user who sets it to another
    option is told to choose that option instead (kl=adaptive), in one line."""
    one_of(f"{group}.{key}", value, options)
    if value != expected:
        raise ConfigError(f"{group}.{key}={value!r}: the {group} option is {expected}; choose another with "
                          f"{group}={value}")


def require_bool(value, key: str) -> None:
    require(isinstance(value, bool), key, value, "must be true or false")


def require_int(value, key: str, least: int, note: str = "") -> None:
    require(isinstance(value, int) and not isinstance(value, bool) and value >= least, key, value,
            f"must be an integer >= {least}{note}")


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_device(name) -> bool:
    import torch

    try:
        torch.device(name)
        return True
    except (RuntimeError, TypeError):
        return False


def resolve_device(name: str) -> torch.device:
    """`device`: auto is cuda when CUDA is available, else cpu; a cuda device without CUDA fails."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return require_available(name, "device", "cpu or auto")


def require_available(name: str, key: str, instead: str) -> torch.device:
    import torch

    device = torch.device(name)
    require(device.type != "cuda" or torch.cuda.is_available(), key, name,
            f"CUDA is not available on this machine (use {key}={instead})")
    return device
