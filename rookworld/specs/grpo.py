"""conf/grpo/: the GRPO update (group size, clipping, loss aggregation, inner epochs) and the knobs of the
loss and the batch beyond the GRPO paper's (`loss_settings(kl)`: the loss's knobs). Rules that need another group
sit in RunSpec."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rookworld.specs.options import (ADVANTAGE_STDS, LOSS_TYPES, REWARD_AGGREGATIONS, SAMPLER_CORRECTIONS,
                                     SCALE_REWARDS)
from rookworld.specs.rules import is_number, one_of, require, require_bool

if TYPE_CHECKING:  # torch loads when a part is built: a refused config never needs it
    import torch

    from rookworld.grpo.entropy import EntropyBonus
    from rookworld.grpo.loss import LossSettings
    from rookworld.specs.kl import KL


@dataclass(frozen=True)
class Entropy:
    coef: float
    adaptive: bool
    target: float
    delta: float
    min: float
    max: float

    def __post_init__(self):
        require_bool(self.adaptive, "grpo.entropy.adaptive")
        for key in ("coef", "target", "delta", "min", "max"):
            value = getattr(self, key)
            require(is_number(value) and value >= 0, f"grpo.entropy.{key}", value, "must be a number >= 0")
        require(self.min <= self.max, "grpo.entropy.min", self.min, f"must be <= grpo.entropy.max={self.max}")

    @property
    def enabled(self) -> bool:
        """The -c H_t term is in the loss: a fixed coefficient other than 0, or the adaptive one."""
        return self.adaptive or self.coef != 0.0

    def build(self, device: torch.device) -> EntropyBonus:
        from rookworld.grpo.entropy import EntropyBonus

        return EntropyBonus(self.coef, self.adaptive, self.target, self.delta, self.min, self.max, device)


@dataclass(frozen=True)
class DynamicSampling:
    enabled: bool
    max_rounds: int

    def __post_init__(self):
        require_bool(self.enabled, "grpo.dynamic_sampling.enabled")
        require(isinstance(self.max_rounds, int) and self.max_rounds >= 1, "grpo.dynamic_sampling.max_rounds",
                self.max_rounds, "must be an integer >= 1")


@dataclass(frozen=True)
class SamplerCorrection:
    mode: str
    cap: float

    def __post_init__(self):
        one_of("grpo.sampler_correction.mode", self.mode, SAMPLER_CORRECTIONS)
        require(is_number(self.cap) and self.cap >= 1, "grpo.sampler_correction.cap", self.cap,
                "must be a number >= 1")


@dataclass(frozen=True)
class RewardNorm:
    enabled: bool
    momentum: float

    def __post_init__(self):
        require(self.momentum is not None and 0 <= self.momentum < 1, "grpo.reward_norm.momentum", self.momentum,
                "must be in [0, 1)")


@dataclass(frozen=True)
class GRPO:
    group_size: int
    scale_rewards: str
    advantage_std: str
    loss_type: str
    epsilon_low: float
    epsilon_high: float
    num_iterations: int
    num_minibatches: int
    micro_batch_size: int
    activation_checkpointing: bool
    cuda_graphs: bool
    graph_bucket: int
    max_grad_norm: float
    reward_aggregation: str
    mask_truncated_completions: bool
    top_entropy_quantile: float
    entropy: Entropy
    dynamic_sampling: DynamicSampling
    sampler_correction: SamplerCorrection
    reward_norm: RewardNorm

    def __post_init__(self):
        require(isinstance(self.group_size, int) and self.group_size >= 2, "grpo.group_size", self.group_size,
                "must be an integer >= 2 (advantages compare completions within a group)")
        one_of("grpo.scale_rewards", self.scale_rewards, SCALE_REWARDS)
        one_of("grpo.advantage_std", self.advantage_std, ADVANTAGE_STDS)
        one_of("grpo.loss_type", self.loss_type, LOSS_TYPES)
        require(0 <= self.epsilon_low < 1, "grpo.epsilon_low", self.epsilon_low, "must be in [0, 1)")
        require(self.epsilon_high >= 0, "grpo.epsilon_high", self.epsilon_high, "must be >= 0")
        require(self.num_iterations >= 1, "grpo.num_iterations", self.num_iterations, "must be >= 1")
        require(self.micro_batch_size >= 0, "grpo.micro_batch_size", self.micro_batch_size, "must be >= 0")
        require(self.max_grad_norm >= 0, "grpo.max_grad_norm", self.max_grad_norm, "must be >= 0 (0 = off)")
        require_bool(self.cuda_graphs, "grpo.cuda_graphs")
        require(isinstance(self.graph_bucket, int) and self.graph_bucket >= 1, "grpo.graph_bucket",
                self.graph_bucket, "must be an integer >= 1")
        one_of("grpo.reward_aggregation", self.reward_aggregation, REWARD_AGGREGATIONS)
        require_bool(self.mask_truncated_completions, "grpo.mask_truncated_completions")
        require(is_number(self.top_entropy_quantile) and 0 < self.top_entropy_quantile <= 1,
                "grpo.top_entropy_quantile", self.top_entropy_quantile, "must be in (0, 1]")

    def loss_settings(self, kl: KL) -> LossSettings:
        """The knobs of grpo/loss.py's grpo_loss for this update and `kl` (its term in the loss, if any)."""
        from rookworld.grpo.loss import LossSettings

        return LossSettings(epsilon_low=self.epsilon_low, epsilon_high=self.epsilon_high,
                            top_entropy_quantile=self.top_entropy_quantile,
                            sampler_correction=self.sampler_correction.mode, sampler_cap=self.sampler_correction.cap,
                            kl_estimator=kl.loss_estimator,
                            kl_bias_correction=kl.loss_estimator is not None and kl.bias_correction,
                            entropy_bonus=self.entropy.enabled)
