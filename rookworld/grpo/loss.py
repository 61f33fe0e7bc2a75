"""The clipped GRPO surrogate, per token, and its aggregation into one scalar.

For completion token t of sequence i, with ratio rho = pi_theta(t) / pi_old(t) against the policy
that sampled it (exactly 1 before the first update of a batch):

    l_t = -min(rho * A_i, clip(rho, 1 - eps_low, 1 + eps_high) * A_i) + beta * KL_t

Aggregation over the completion mask m of a minibatch of N sequences (`grpo` and `dr_grpo` are
TRL's loss_type names; TRL calls `token_mean` `dapo`, and `bnpo` on one process):
    grpo       mean_i [ sum_t m l / sum_t m ]          per-sequence mean (length-biased)
    dr_grpo    sum_{i,t} m l / (N * L_max)              Dr. GRPO, L_max = max_new_tokens
    token_mean sum_{i,t} m l / sum_{i,t} m              DAPO token mean over the minibatch

The trainer builds one `LossNormalizer` per minibatch (one optimizer step) from that minibatch's
own rows: its micro-batches add up to the minibatch loss whatever the micro-batch size, and each
minibatch is normalised on its own, not over the whole generation batch.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from rookworld.grpo.options import LOSS_TYPES


@dataclass(frozen=True)
class LossNormalizer:
    loss_type: str
    num_sequences: int
    num_tokens: torch.Tensor  # on the device: reading it would cost a host sync per minibatch
    max_completion_length: int

    @classmethod
    def for_batch(cls, loss_type: str, mask: torch.Tensor, max_completion_length: int):
        if loss_type not in LOSS_TYPES:
            raise ValueError(f"grpo.loss_type={loss_type!r}: expected one of {LOSS_TYPES}")
        return cls(loss_type, mask.shape[0], mask.sum().clamp(min=1), max_completion_length)

    def aggregate(self, per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        masked = per_token * mask
        if self.loss_type == "grpo":
            per_sequence = masked.sum(1) / mask.sum(1).clamp(min=1)
            return per_sequence.sum() / self.num_sequences
        if self.loss_type == "dr_grpo":
            return masked.sum() / (self.num_sequences * self.max_completion_length)
        return masked.sum() / self.num_tokens


@dataclass
class ClipStats:
    low: torch.Tensor     # share of tokens clipped at 1 - eps_low with negative advantage
    high: torch.Tensor    # share clipped at 1 + eps_high with positive advantage
    region: torch.Tensor  # either


def clipped_surrogate(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                      eps_low: float, eps_high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token policy loss [B,T] and the ratio [B,T]; advantages are per sequence [B]."""
    ratio = torch.exp(logp - old_logp)
    adv = advantages.unsqueeze(1)
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * adv
    return -torch.min(unclipped, clipped), ratio


def clip_stats(ratio: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
               eps_low: float, eps_high: float) -> ClipStats:
    adv = advantages.unsqueeze(1)
    low = (ratio < 1.0 - eps_low) & (adv < 0)
    high = (ratio > 1.0 + eps_high) & (adv > 0)
    n = mask.sum().clamp(min=1)

    def share(hit: torch.Tensor) -> torch.Tensor:
        return (hit.float() * mask).sum() / n

    return ClipStats(low=share(low), high=share(high), region=share(low | high))
