"""The clipped GRPO surrogate, per token, and its aggregation into one scalar.

For completion token t of sequence i, with ratio rho = pi_theta(t) / pi_old(t) against the policy
that sampled it (exactly 1 before the first update of a batch):

    l_t = -min(rho * A_i, clip(rho, 1 - eps_low, 1 + eps_high) * A_i) + beta * KL_t

Aggregation over the completion mask m of a minibatch of N sequences (`grpo` and `dr_grpo` are
TRL's loss_type names; TRL calls `token_mean` `dapo`, and `bnpo` on one process):
    grpo       mean_i [ sum_t m l / sum_t m ]          per-sequence mean (length-biased)
    dr_grpo    sum_{i,t} m l / (N * L_max)              Dr. GRPO, L_max = max_new_tokens
    token_mean sum_{i,t} m l / sum_{i,t} m              DAPO token mean over the minibatch

`grpo_loss` is the whole objective of one micro-batch: this surrogate on the trained tokens (the
top-entropy mask), weighted by the sampler correction, plus the KL term (placement=loss), minus the
entropy bonus c * H_t on the trained tokens, aggregated as above. It is pure and graph-safe (no host
sync, no backward): the learner (learner.py) owns the model passes, accumulation and backward().

The trainer builds one `LossNormalizer` per minibatch (one optimizer step) from that minibatch's
own rows: its micro-batches add up to the minibatch loss whatever the micro-batch size, and each
minibatch is normalised on its own, not over the whole generation batch.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from rookworld.grpo.entropy import high_entropy_mask
from rookworld.grpo.kl import kl_per_token
from rookworld.grpo.sampler_correction import sampler_weights


@dataclass(frozen=True)
class LossNormalizer:
    loss_type: str
    num_sequences: int
    num_tokens: torch.Tensor  # on the device: reading it would cost a host sync per minibatch
    max_completion_length: int

    @classmethod
    def for_batch(cls, loss_type: str, mask: torch.Tensor, max_completion_length: int):
        if loss_type not in ("grpo", "dr_grpo", "token_mean"):
            raise ValueError(f"grpo.loss_type={loss_type!r}: expected grpo, dr_grpo or token_mean")
        return cls(loss_type, mask.shape[0], mask.sum().clamp(min=1), max_completion_length)

    def aggregate(self, per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        masked = per_token * mask
        if self.loss_type == "grpo":
            per_sequence = masked.sum(1) / mask.sum(1).clamp(min=1)
            return per_sequence.sum() / self.num_sequences
        if self.loss_type == "dr_grpo":
            return masked.sum() / (self.num_sequences * self.max_completion_length)
        return masked.sum() / self.num_tokens  # token_mean


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


@dataclass(frozen=True)
class LossSettings:
    """The knobs of `grpo_loss`, fixed for a run (specs/grpo.py's GRPO.loss_settings builds it from grpo.* and kl.*)."""
    epsilon_low: float
    epsilon_high: float
    top_entropy_quantile: float
    sampler_correction: str   # grpo.sampler_correction.mode
    sampler_cap: float        # grpo.sampler_correction.cap
    kl_estimator: str | None  # None: no KL term in the loss (KL off, or kl.placement=reward)
    kl_bias_correction: bool  # KL_t weighted by the ratio
    entropy_bonus: bool       # the -c H_t term (grpo.entropy on)


@dataclass
class LossStats:
    """What `grpo_loss` reports besides the loss, all detached."""
    clip: ClipStats
    trained_entropy: torch.Tensor  # sum of H_t over the trained tokens
    trained_tokens: torch.Tensor   # how many tokens were trained


@dataclass
class LossInputs:
    """One micro-batch [B, T] of `grpo_loss`: the tensors of its rows and this step's coefficients."""
    logp: torch.Tensor                  # the policy's log-probs, with gradients
    old_logp: torch.Tensor              # the sampling policy's (the ratio's denominator)
    ref_logp: torch.Tensor | None       # the reference's; None: no KL term
    advantages: torch.Tensor            # [B] per sequence
    mask: torch.Tensor                  # the completion mask
    entropy: torch.Tensor               # per-token entropies, with gradients
    sampler_logp: torch.Tensor          # the sampler's own log-probs (the sampler correction)
    normalizer: LossNormalizer          # the minibatch's aggregation
    beta: torch.Tensor                  # this step's KL coefficient (a device scalar)
    entropy_coef: torch.Tensor          # this step's entropy-bonus coefficient (a device scalar)
    trained: torch.Tensor | None = None  # the minibatch's top-entropy mask; None: this micro-batch's own


def grpo_loss(inputs: LossInputs, settings: LossSettings) -> tuple[torch.Tensor, LossStats]:
    """The loss of one micro-batch [B, T] and its statistics."""
    x, s = inputs, settings
    per_token, ratio = clipped_surrogate(x.logp, x.old_logp, x.advantages, s.epsilon_low, s.epsilon_high)
    trained = x.trained if x.trained is not None else high_entropy_mask(x.entropy.detach(), x.mask,
                                                                        s.top_entropy_quantile)
    per_token = per_token * trained
    if s.sampler_correction != "none":
        per_token = per_token * sampler_weights(x.old_logp, x.sampler_logp, x.mask, s.sampler_correction,
                                                s.sampler_cap)
    if x.ref_logp is not None and s.kl_estimator is not None:
        kl = kl_per_token(x.logp, x.ref_logp, s.kl_estimator)
        per_token = per_token + x.beta * (kl * ratio if s.kl_bias_correction else kl)
    if s.entropy_bonus:  # -c H_t on the trained tokens, aggregated as the policy loss (as TRL)
        per_token = per_token - x.entropy_coef * x.entropy * trained
    loss = x.normalizer.aggregate(per_token, x.mask)
    stats = LossStats(clip=clip_stats(ratio.detach(), x.advantages, x.mask, s.epsilon_low, s.epsilon_high),
                      trained_entropy=(x.entropy * trained).sum().detach(), trained_tokens=trained.sum().detach())
    return loss, stats
