"""conf/optimizer/: the torch optimizer, one spec per option (optimizer=adamw|sgd; `build(params)` makes it),
and the shared schedule (linear warm-up, cosine to a floor: Schedule.lr_at)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rookworld.specs.rules import ConfigError, one_of, require, require_bool

if TYPE_CHECKING:  # torch loads when an optimizer is built: a refused config never needs it
    import torch

NAMES = ("adamw", "sgd")


def schedule_uses_steps(min_lr_ratio: float) -> bool:
    """Whether Schedule.lr_at depends on the run's total steps: the cosine decays to a floor below
    the peak."""
    return min_lr_ratio < 1


@dataclass(frozen=True)
class Schedule:
    """What every optimizer option shares: the name and the LR schedule."""
    name: str
    lr: float
    warmup_steps: int
    min_lr_ratio: float

    def __post_init__(self):
        one_of("optimizer.name", self.name, NAMES)
        expected = self.expected_name()
        if self.name != expected:
            raise ConfigError(f"optimizer.name={self.name!r}: the optimizer option is {expected}; "
                              f"choose another with optimizer={self.name}")
        require(isinstance(self.lr, (int, float)) and self.lr > 0 and math.isfinite(self.lr), "optimizer.lr",
                self.lr, "must be a positive finite number")
        require(self.warmup_steps >= 0, "optimizer.warmup_steps", self.warmup_steps, "must be >= 0")
        require(0 <= self.min_lr_ratio <= 1, "optimizer.min_lr_ratio", self.min_lr_ratio, "must be in [0, 1]")

    @staticmethod
    def expected_name() -> str:
        raise NotImplementedError

    def lr_at(self, step: int, total_steps: int) -> float:
        """Learning rate for the update of step `step` (0-based) of a `total_steps` schedule."""
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        decay_steps = max(total_steps - self.warmup_steps, 1)
        progress = min((step - self.warmup_steps) / decay_steps, 1.0)
        floor = self.lr * self.min_lr_ratio
        return floor + 0.5 * (self.lr - floor) * (1.0 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class AdamW(Schedule):
    betas: tuple[float, float]
    weight_decay: float
    eps: float
    fused: bool

    @staticmethod
    def expected_name() -> str:
        return "adamw"

    def build(self, params) -> torch.optim.Optimizer:
        import torch

        return torch.optim.AdamW(params, lr=self.lr, betas=tuple(self.betas), eps=self.eps,
                                 weight_decay=self.weight_decay, fused=self.fused)


@dataclass(frozen=True)
class SGD(Schedule):
    momentum: float
    nesterov: bool
    weight_decay: float

    def __post_init__(self):
        super().__post_init__()
        require(0 <= self.momentum < 1, "optimizer.momentum", self.momentum, "must be in [0, 1)")
        require_bool(self.nesterov, "optimizer.nesterov")
        require(not self.nesterov or self.momentum > 0, "optimizer.nesterov", self.nesterov,
                "needs optimizer.momentum > 0")
        require(self.weight_decay >= 0, "optimizer.weight_decay", self.weight_decay, "must be >= 0")

    @staticmethod
    def expected_name() -> str:
        return "sgd"

    def build(self, params) -> torch.optim.Optimizer:
        import torch

        return torch.optim.SGD(params, lr=self.lr, momentum=self.momentum, nesterov=self.nesterov,
                               weight_decay=self.weight_decay)


Optimizer = AdamW | SGD
