"""Entropy terms of the GRPO loss: the top-entropy token mask and the entropy bonus.

Top-entropy tokens ("Beyond the 80/20 Rule", arXiv 2506.01939; TRL `top_entropy_quantile`): only the
tokens whose entropy H_t is at or above the (1 - q) quantile (linear interpolation, as torch.quantile)
of the minibatch's completion tokens get a loss; q = 1 keeps every token. The quantile is taken over
the whole minibatch (one optimizer step) whatever grpo.micro_batch_size, so that the micro-batch size
stays a memory setting (TRL takes it per micro-batch).

Entropy bonus (Skywork-OR1, arXiv 2505.22312; TRL `entropy_coef`, `use_adaptive_entropy`): -c * H_t on each
token the policy loss acts on, aggregated as the policy loss (grpo.loss_type), as TRL does; with token_mean

    loss = policy loss - c * sum_trained H_t / (all completion tokens of the minibatch)

so at top_entropy_quantile q the bonus is about q times c times the trained tokens' mean entropy, and it keeps
its weight against the policy term (which is normalised the same way) whatever q.

With `adaptive`, c moves once per optimizer step from the mean entropy H of that step's trained
tokens, as TRL does: c <- min(c + delta, c_max) if H <= target, else max(c - delta, c_min); and the
bonus applies only while the last measured H is at or below the target (c_applied = c if
H_last <= target, else 0). As in TRL, H_last starts at +inf: no bonus until the first measurement.
The coefficient lives on the device, so no step waits for the host.
"""
from __future__ import annotations

import torch


def high_entropy_mask(entropy: torch.Tensor, mask: torch.Tensor, quantile: float) -> torch.Tensor:
    """[B, T] float: 1 for completion tokens (mask > 0) whose entropy is >= the (1 - quantile) quantile
    of the completion tokens' entropies, else 0; `mask` itself at quantile 1. Static shapes only (CUDA
    graphs): the quantile is read off a sort with the padding sorted last."""
    real = mask > 0
    if quantile >= 1.0:
        return real.float()
    values = entropy.float().masked_fill(~real, float("inf")).flatten().sort().values
    count = real.sum()
    position = (1.0 - quantile) * (count - 1).clamp(min=0).float()
    low, high = position.floor().long().view(1), position.ceil().long().view(1)
    below, above = values.gather(0, low), values.gather(0, high)  # gather: no host read (CUDA graphs)
    threshold = (below + (above - below) * (position - low.float()))[0]
    return ((entropy.float() >= threshold) & real).float()


class EntropyBonus:
    """The coefficient c of the entropy bonus, fixed or adaptive (see the module docstring)."""

    def __init__(self, coef: float, adaptive: bool, target: float, delta: float, coef_min: float,
                 coef_max: float, device: torch.device):
        self.adaptive, self.target, self.delta, self.coef_min, self.coef_max = adaptive, target, delta, coef_min, coef_max
        self.enabled = adaptive or coef != 0.0
        self.coef = torch.tensor(float(coef), device=device)
        self.last_entropy = torch.tensor(float("inf"), device=device)  # before any measurement: no bonus (TRL)

    def applied_coef(self) -> torch.Tensor:
        """The coefficient this optimizer step's loss uses (a device scalar)."""
        if not self.adaptive:
            return self.coef
        return torch.where(self.last_entropy <= self.target, self.coef, 0.0)

    def update(self, entropy: torch.Tensor) -> None:
        """After an optimizer step: the mean entropy of its trained tokens moves the adaptive coefficient."""
        if not self.adaptive:
            return
        raised = (self.coef + self.delta).clamp(max=self.coef_max)
        lowered = (self.coef - self.delta).clamp(min=self.coef_min)
        finite = torch.isfinite(entropy)
        self.coef = torch.where(finite, torch.where(entropy <= self.target, raised, lowered), self.coef)
        self.last_entropy = torch.where(finite, entropy, self.last_entropy)

    def state_dict(self) -> dict:
        return {"coef": self.coef.item(), "last_entropy": self.last_entropy.item()}

    def load_state_dict(self, state: dict) -> None:
        self.coef.fill_(state["coef"])
        self.last_entropy.fill_(state["last_entropy"])
