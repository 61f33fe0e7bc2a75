"""conf/kl/: the KL penalty against a frozen reference model, one spec per option (kl=none|fixed|adaptive).
"KL" (logged as `kl`, guarded by `max`) is the per-token k3 estimate; `estimator` selects the penalty term.
`build()` makes the coefficient controller of rookworld/grpo/kl.py; the properties say what a run needs of it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rookworld.specs.options import KL_ESTIMATORS, KL_PLACEMENTS
from rookworld.specs.rules import is_device, one_of, require, require_bool, require_option

if TYPE_CHECKING:  # torch loads when the controller is built: a refused config never needs it
    from rookworld.grpo.kl import KLController

KINDS = ("none", "fixed", "adaptive")


@dataclass(frozen=True)
class KLNone:
    """No penalty term, no reference model, no KL guard."""
    kind: str

    def __post_init__(self):
        require_option("kl", "kind", self.kind, KINDS, "none")

    needs_reference = False  # no reference model is loaded
    coef = 0.0               # beta stays 0
    ref_device = "same"
    loss_estimator = None    # no KL term in the loss
    reward_estimator = None  # no KL penalty in the reward
    bias_correction = False
    max = None               # the KL guard is off
    max_steps_above = 1
    sync_every = 0           # no reference to move toward the policy
    sync_alpha = 0.0

    def build(self) -> KLController:
        """beta stays 0."""
        from rookworld.grpo.kl import KLController

        return KLController("none", 0.0, 0, 1.0)


@dataclass(frozen=True)
class KLFixed:
    """beta = coef (after the warm-up) times the per-token penalty."""
    kind: str
    coef: float
    estimator: str
    placement: str
    bias_correction: bool
    warmup_steps: int
    warmup_factor: float
    max: float | None
    max_steps_above: int
    ref_device: str
    sync_every: int
    sync_alpha: float

    def __post_init__(self):
        require_option("kl", "kind", self.kind, KINDS, self.expected_kind())
        one_of("kl.estimator", self.estimator, KL_ESTIMATORS)
        one_of("kl.placement", self.placement, KL_PLACEMENTS)
        require_bool(self.bias_correction, "kl.bias_correction")
        require(not (self.bias_correction and self.estimator == "k2"), "kl.bias_correction", self.bias_correction,
                "with kl.estimator='k2' the ratio-weighted KL gradient is biased; use kl.estimator=k1 or k3 "
                "(unbiased with it) or kl.bias_correction=false")
        require(self.coef >= 0, "kl.coef", self.coef, "must be >= 0")
        require(self.sync_every >= 0, "kl.sync_every", self.sync_every, "must be >= 0 (0 = never)")
        require(0 <= self.sync_alpha <= 1, "kl.sync_alpha", self.sync_alpha, "must be in [0, 1]")
        require(self.max is None or self.max > 0, "kl.max", self.max, "must be > 0 or null (guard off)")
        require(self.max_steps_above >= 1, "kl.max_steps_above", self.max_steps_above, "must be >= 1")
        require(self.ref_device == "same" or is_device(self.ref_device), "kl.ref_device", self.ref_device,
                "expected same, cpu or cuda:N")

    @staticmethod
    def expected_kind() -> str:
        return "fixed"

    needs_reference = True

    @property
    def loss_estimator(self) -> str | None:
        """The estimator of the KL term in the loss; None when the penalty sits in the reward."""
        return self.estimator if self.placement == "loss" else None

    @property
    def reward_estimator(self) -> str | None:
        """The estimator of the KL penalty in the reward; None when it sits in the loss."""
        return self.estimator if self.placement == "reward" else None

    def build(self) -> KLController:
        from rookworld.grpo.kl import KLController

        return KLController(self.kind, self.coef, self.warmup_steps, self.warmup_factor)


@dataclass(frozen=True)
class KLAdaptive(KLFixed):
    """beta follows a controller (Ziegler et al. 2019) steering the measured KL toward `target`."""
    target: float
    horizon: int

    def __post_init__(self):
        super().__post_init__()
        require(self.coef > 0, "kl.coef", self.coef, "adaptive KL needs a starting coef > 0 (it scales multiplicatively)")
        require(self.target is not None and self.target > 0, "kl.target", self.target, "adaptive KL needs a target > 0")
        require(self.horizon is not None and self.horizon > 0, "kl.horizon", self.horizon,
                "adaptive KL needs a horizon > 0")

    @staticmethod
    def expected_kind() -> str:
        return "adaptive"

    def build(self) -> KLController:
        from rookworld.grpo.kl import KLController

        return KLController(self.kind, self.coef, self.warmup_steps, self.warmup_factor, self.target, self.horizon)


KL = KLNone | KLFixed | KLAdaptive
