"""Correction for the gap between the sampler and the trainer (TIS / MIS; TRL
`vllm_importance_sampling_mode`, `vllm_importance_sampling_clip_max`).

Generation runs its own kernels (bf16 CUDA graphs, fused decode) and records each sampled token's
log-prob under the sampler, log mu(t). The update computes the same token's log-prob under the policy
that sampled it, log pi_old(t), with the training kernels. The two differ by rounding, so the batch
is slightly off-policy. Each token's policy loss is weighted by

    token_*:     w_t = pi_old(t) / mu(t)                        per token
    sequence_*:  w   = prod_t pi_old(t) / mu(t)                 per completion (sum of log-ratios)
    *_truncate:  w <- min(w, C)          (truncated importance sampling, TIS)
    *_mask:      w <- w if w <= C else 0  (masked importance sampling, MIS)

Weights carry no gradient. Tokens outside the completion mask contribute a log-ratio of 0.
"""
from __future__ import annotations

import torch


def sampler_weights(old_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, mode: str,
                    cap: float) -> torch.Tensor:
    """[B, T] (token modes) or [B, 1] (sequence modes) weights of the policy loss."""
    scope, _, action = mode.partition("_")
    if scope not in ("token", "sequence") or action not in ("truncate", "mask"):
        raise ValueError(f"grpo.sampler_correction.mode={mode!r}: expected token_ or sequence_ with truncate or mask")
    log_ratio = (old_logp.float() - sampler_logp.float()) * mask
    if scope == "sequence":
        log_ratio = log_ratio.sum(-1, keepdim=True)
    weight = torch.exp(log_ratio)
    if action == "truncate":
        return weight.clamp(max=cap)
    return weight.masked_fill(weight > cap, 0.0)


def mismatch(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Mean and max |log pi_old - log mu| per completion token: how far the sampler is off-policy."""
    gap = (trainer_logp.float() - sampler_logp.float()).abs() * mask
    return {"sampler/logp_gap_mean": gap.sum() / mask.sum().clamp(min=1), "sampler/logp_gap_max": gap.max()}


def weight_stats(weights: torch.Tensor, mask: torch.Tensor, mode: str) -> dict[str, torch.Tensor]:
    """Min, mean and max of the weights `sampler_weights` gave the loss (TRL's
    sampling/importance_sampling_ratio/*): over the completion tokens (token modes) or the completions
    with at least one token (sequence modes). No host sync."""
    real = mask.sum(-1, keepdim=True) > 0 if mode.startswith("sequence") else mask > 0
    count = real.sum().clamp(min=1)
    return {"sampling/importance_sampling_ratio/min": weights.masked_fill(~real, float("inf")).min(),
            "sampling/importance_sampling_ratio/mean": (weights * real).sum() / count,
            "sampling/importance_sampling_ratio/max": weights.masked_fill(~real, float("-inf")).max()}
