"""Group-relative advantages: each completion is judged against the other completions of its prompt.

    A_i = (r_i - mean(r_group)) / (std + eps)      scale_rewards = "group"   (GRPO paper)
    A_i = (r_i - mean(r_group)) / (std_batch + eps) scale_rewards = "batch"  (centred per group)
    A_i =  r_i - mean(r_group)                     scale_rewards = "none"    (Dr. GRPO)

The std is the sample std (divisor n - 1, torch's default, as TRL and verl compute it) unless
`advantage_std="population"` (divisor n): for rewards {0, 1} in a group of 2 the sample std is
0.71 and the population std 0.5, so the choice scales every advantage by sqrt(G / (G - 1)).

A group whose rewards are all equal has zero advantage for every member and carries no signal;
its share of the sampled groups (raw rewards) is reported as `frac_reward_zero_std`.

Per-criterion normalisation (`reward_aggregation=normalize_then_sum`: GDPO, arXiv 2601.05242; TRL
`multi_objective_aggregation="normalize_then_sum"`): with criteria c_k of weight w_k (the reward's
own weights; the malformed indicator weighs the malformed penalty),

    r_i = sum_k w_k (c_ik - mean_group(c_k)) / (std_group(c_k) + eps)
    A_i = (r_i - mean_batch(r)) / (std_batch(r) + eps)

so criteria of small spread are not drowned by those of large spread. A group with no criterion
varying has r = 0 for every member (zero advantage).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

ZERO_STD = 1e-6  # a group whose reward std is below this does not vary


@dataclass
class Advantages:
    values: torch.Tensor          # [P*G] one advantage per completion
    zero_std_groups: torch.Tensor  # [P] bool: groups whose rewards do not vary

    @property
    def frac_zero_std(self) -> float:
        return self.zero_std_groups.float().mean().item()


def is_sample_std(advantage_std: str) -> bool:
    """Whether advantage_std takes the sample std (n - 1, unbiased) rather than the population one (n)."""
    if advantage_std not in ("sample", "population"):
        raise ValueError(f"advantage_std={advantage_std!r}: expected sample or population")
    return advantage_std == "sample"


def group_advantages(rewards: torch.Tensor, group_size: int, scale_rewards: str,
                     advantage_std: str = "sample", eps: float = 1e-4) -> Advantages:
    """rewards: [P*G], the G completions of each prompt contiguous."""
    if scale_rewards not in ("group", "batch", "none"):
        raise ValueError(f"scale_rewards={scale_rewards!r}: expected group, batch or none")
    unbiased = is_sample_std(advantage_std)
    grouped = rewards.view(-1, group_size)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    group_std = grouped.std(dim=1, unbiased=unbiased, keepdim=True)
    zero_std = group_std.squeeze(1) < ZERO_STD
    # Equal rewards can leave a rounding residue after centring; such a group carries no signal.
    centred = centred.masked_fill(zero_std.unsqueeze(1), 0.0)
    if scale_rewards == "group":
        centred = centred / (group_std + eps)
    elif scale_rewards == "batch":
        centred = centred / (rewards.std(unbiased=unbiased) + eps)
    return Advantages(values=centred.reshape(-1), zero_std_groups=zero_std)


def varying_groups(rewards: torch.Tensor, group_size: int) -> list[int]:
    """The groups (of `group_size` contiguous rows) whose rewards vary: the ones with a learning signal."""
    std = rewards.view(-1, group_size).std(dim=1, unbiased=False)
    return [group for group, spread in enumerate(std.tolist()) if spread >= ZERO_STD]


def zero_std_share(rewards: torch.Tensor, group_size: int) -> float:
    """The share of groups (of `group_size` contiguous rows) whose rewards do not vary (no signal)."""
    groups = rewards.numel() // group_size
    return 1.0 - len(varying_groups(rewards, group_size)) / groups


def criterion_advantages(criteria: torch.Tensor, weights: torch.Tensor, group_size: int,
                         advantage_std: str = "sample", eps: float = 1e-4) -> Advantages:
    """criteria: [P*G, K] each completion's criteria (the G completions of a prompt contiguous);
    weights: [K]. The normalize_then_sum advantages of the module docstring."""
    unbiased = is_sample_std(advantage_std)
    grouped = criteria.view(-1, group_size, criteria.shape[1])
    std = grouped.std(dim=1, unbiased=unbiased, keepdim=True)
    normalized = (grouped - grouped.mean(dim=1, keepdim=True)) / (std + eps)
    normalized = normalized.masked_fill(std < ZERO_STD, 0.0)  # a constant criterion carries no signal
    rewards = (normalized * weights).sum(-1).reshape(-1)
    zero_std = (std < ZERO_STD).all(dim=2).squeeze(1)
    values = (rewards - rewards.mean()) / (rewards.std(unbiased=unbiased) + eps)
    return Advantages(values=values.masked_fill(zero_std.repeat_interleave(group_size), 0.0), zero_std_groups=zero_std)


class EMARewardNormalizer:
    """Optional reward normalisation by exponential moving averages of batch mean and std.

    Applied to raw rewards before the group advantages; with scale_rewards=group it only matters
    for "none"/"batch" scaling, so it is off by default.
    """

    def __init__(self, momentum: float, eps: float = 1e-8):
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"reward_norm.momentum={momentum}: expected 0 <= momentum < 1")
        self.momentum, self.eps = momentum, eps
        self.mean: float | None = None
        self.std: float | None = None

    def __call__(self, rewards: torch.Tensor) -> torch.Tensor:
        batch_mean, batch_std = rewards.mean().item(), rewards.std(unbiased=False).item()
        if self.mean is None:
            self.mean, self.std = batch_mean, batch_std
        else:
            m = self.momentum
            self.mean = m * self.mean + (1 - m) * batch_mean
            self.std = m * self.std + (1 - m) * batch_std
        return (rewards - self.mean) / (self.std + self.eps)

    def state_dict(self) -> dict:
        return {"mean": self.mean, "std": self.std}

    def load_state_dict(self, state: dict) -> None:
        self.mean, self.std = state["mean"], state["std"]
