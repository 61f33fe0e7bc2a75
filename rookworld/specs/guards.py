"""conf/guards/: the divergence detectors checked after every step (rookworld/grpo/guards.py): every window an
integer >= 0 (0 = detector off), every threshold a positive number. The KL ceiling is kl.max; `build(kl)` makes
the detectors."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from rookworld.grpo.guards import Detectors
from rookworld.specs.rules import is_number, require, require_bool, require_int

if TYPE_CHECKING:
    from rookworld.specs.kl import KL


@dataclass(frozen=True)
class KLGrowth:
    window: int
    factor: float
    min_fraction: float

    def __post_init__(self):
        require_int(self.window, "guards.kl_growth.window", 0, " (0 = off)")
        require(is_number(self.factor) and self.factor > 1, "guards.kl_growth.factor", self.factor,
                "must be a number > 1")
        require(is_number(self.min_fraction) and 0 < self.min_fraction <= 1, "guards.kl_growth.min_fraction",
                self.min_fraction, "must be in (0, 1] (a fraction of kl.max)")


@dataclass(frozen=True)
class EntropyCollapse:
    window: int
    min_ratio: float

    def __post_init__(self):
        require_int(self.window, "guards.entropy.window", 0, " (0 = off)")
        require(is_number(self.min_ratio) and 0 < self.min_ratio < 1, "guards.entropy.min_ratio", self.min_ratio,
                "must be in (0, 1)")


@dataclass(frozen=True)
class GradNormSpike:
    window: int
    factor: float
    steps_above: int

    def __post_init__(self):
        require_int(self.window, "guards.grad_norm.window", 0, " (0 = off)")
        require(is_number(self.factor) and self.factor > 1, "guards.grad_norm.factor", self.factor,
                "must be a number > 1")
        require_int(self.steps_above, "guards.grad_norm.steps_above", 1)


@dataclass(frozen=True)
class RewardDrop:
    window: int
    drop: float

    def __post_init__(self):
        require_int(self.window, "guards.reward.window", 0, " (0 = off)")
        require(is_number(self.drop) and self.drop > 0, "guards.reward.drop", self.drop, "must be a number > 0")


@dataclass(frozen=True)
class Guards:
    max_nonfinite_steps: int
    keep_finite_weights: bool
    kl_growth: KLGrowth
    entropy: EntropyCollapse
    grad_norm: GradNormSpike
    reward: RewardDrop

    def __post_init__(self):
        require_int(self.max_nonfinite_steps, "guards.max_nonfinite_steps", 1)
        require_bool(self.keep_finite_weights, "guards.keep_finite_weights")

    def as_mapping(self) -> dict:
        return asdict(self)

    def build(self, kl: KL) -> Detectors:
        """The run's divergence detectors, with the KL ceiling of `kl` (kl=none: no KL detectors)."""
        return Detectors(self.as_mapping(), kl.max, kl.max_steps_above)
