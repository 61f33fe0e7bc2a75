"""KL to the reference model: per-token estimators and the coefficient controllers.

With r = log pi_theta(t) - log pi_ref(t) on a token t sampled from the policy:
    k1 = r                      unbiased, high variance, can be negative per token
    k2 = r^2 / 2                biased value, unbiased gradient when used as a loss
    k3 = exp(-r) - 1 + r        unbiased, low variance, >= 0 (biased gradient as a loss)
The log-ratio is clamped to [-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP] (as verl does) so one rare token
cannot produce an infinite penalty.

Where the penalty goes (`kl.placement`):
    loss    beta * KL_t added to each token's loss (GRPO; verl use_kl_loss; as TRL, k3 unclamped); with
            `bias_correction` (TRL use_bias_correction_kl, DeepSeek-V3.2) KL_t is weighted by the ratio
            rho = pi_theta / pi_old, which carries the gradient: at rho = 1 the gradient is
            (KL_t + dKL_t/dr) grad log pi_theta, i.e. (r + 1) for k1 and exactly r for k3, whose
            expectation is the KL's true gradient E[r grad log pi_theta] (E[grad log pi_theta] = 0);
            for k2 it is (r^2/2 + r), biased by E[r^2/2 grad log pi_theta]: the spec refuses k2 with it
    reward  the sequence reward becomes r_i - beta * sum_t KL_t(pi_old, pi_ref) before the group
            advantages, and the loss has no KL term (verl use_kl_in_reward; with k1 the unbiased choice).
            As verl's kl_penalty, k3 is clamped per token to [-K3_CLAMP, K3_CLAMP] here, and the adaptive
            controller reads this penalty's own estimator (verl: the mean over completions of each one's
            per-token mean), not the `kl` metric

"KL" in logs and guards always means: the k3 estimate averaged over all completion tokens of the
batch (per-token mean), measured between the policy that sampled the batch and the reference.
It is exactly 0 before the first update when both models run in the same precision.
"""
from __future__ import annotations

import math

import torch

LOG_RATIO_CLAMP = 20.0
K3_CLAMP = 10.0  # verl's per-token clamp of k3 (low_var_kl) in the reward penalty


def kl_per_token(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str) -> torch.Tensor:
    r = (logp - ref_logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    if estimator == "k1":
        return r
    if estimator == "k2":
        return 0.5 * r * r
    if estimator == "k3":
        return torch.expm1(-r) + r
    raise ValueError(f"kl.estimator={estimator!r}: expected k1, k2 or k3")


def kl_in_reward(old_logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor,
                 estimator: str) -> tuple[torch.Tensor, torch.Tensor]:
    """placement=reward, from the sampling policy, as verl's apply_kl_penalty: [B] sum_t KL_t over each
    completion's tokens (times beta, the penalty) and the controller's reading, the mean over completions
    of each one's per-token mean KL_t (a device scalar). k3 is clamped per token to +-K3_CLAMP."""
    per_token = kl_per_token(old_logp.float(), ref_logp.float(), estimator)
    if estimator == "k3":
        per_token = per_token.clamp(-K3_CLAMP, K3_CLAMP)
    sums = (per_token * mask).sum(-1)
    return sums, (sums / mask.sum(-1).clamp(min=1)).mean()


class KLController:
    """Coefficient beta of the KL penalty for each step.

    kind "none": beta = 0 and no reference model is loaded.
    kind "fixed": beta = coef.
    kind "adaptive": beta starts at coef and follows the proportional controller of
      Ziegler et al. (2019), once per step: beta *= 1 + clip(KL/target - 1, -0.2, 0.2) / horizon,
      horizon counted in GRPO steps.
    During the first warmup_steps steps the coefficient is multiplied by warmup_factor (a KL
    warm-up); the adaptive controller keeps updating underneath.
    """

    def __init__(self, kind: str, coef: float, warmup_steps: int, warmup_factor: float,
                 target: float | None = None, horizon: int | None = None):
        self.kind, self.base_coef = kind, coef
        self.warmup_steps, self.warmup_factor = warmup_steps, warmup_factor
        self.target, self.horizon = target, horizon
        self.coef = 0.0 if kind == "none" else coef

    @property
    def enabled(self) -> bool:
        return self.kind != "none"

    def beta(self, step: int) -> float:
        factor = self.warmup_factor if step < self.warmup_steps else 1.0
        return self.coef * factor

    def update(self, observed_kl: float) -> None:
        if self.kind != "adaptive" or not math.isfinite(observed_kl):
            return
        error = min(max(observed_kl / self.target - 1.0, -0.2), 0.2)
        self.coef *= 1.0 + error / self.horizon

    def state_dict(self) -> dict:
        return {"coef": self.coef}

    def load_state_dict(self, state: dict) -> None:
        self.coef = state["coef"]
