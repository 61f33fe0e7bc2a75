"""Knobs that cannot act under a run's other settings: a sweep refuses to search one, a plain run warns.

Two settings switch a knob off while the run still accepts it:

- one update per batch (grpo.num_iterations=1 and grpo.num_minibatches=1): the ratio pi_theta / pi_old is
  exactly 1 at the only update (pi_old is the policy itself), so the clip never binds and grpo.epsilon_low /
  grpo.epsilon_high change nothing (two clip ranges give bitwise-equal weights);
- k1 in the loss (kl.estimator=k1, kl.placement=loss, kl.bias_correction=false): the penalty's gradient is
  beta x grad log pi_theta, whose expectation under the policy's own samples is 0, so kl.coef (and its
  warm-up) only scales noise, never pulls toward the reference.

The composed config is read as plain keys (a DictConfig or a mapping of the same shape).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rookworld.specs.rules import ConfigError


@dataclass(frozen=True)
class InertKnobs:
    knobs: tuple[str, ...]  # the dotted keys that cannot act
    setting: str            # the settings that switch them off, as key=value
    why: str                # what the setting does to them

    @property
    def reason(self) -> str:
        return f"cannot act with {self.setting} ({self.why})"


ONE_UPDATE = InertKnobs(("grpo.epsilon_low", "grpo.epsilon_high"),
                        "grpo.num_iterations=1 and grpo.num_minibatches=1",
                        "one update per batch: the ratio is 1 and the clip never binds")
K1_IN_THE_LOSS = InertKnobs(("kl.coef", "kl.warmup_steps", "kl.warmup_factor"),
                            "kl.estimator=k1, kl.placement=loss, kl.bias_correction=false",
                            "the k1 penalty's expected gradient is 0: the coefficient only scales noise; use k2 or "
                            "k3 in the loss, k1 with kl.bias_correction=true or kl.placement=reward")


def inert_knobs(config: Mapping[str, Any]) -> list[InertKnobs]:
    """The groups of knobs that cannot act under `config` (a composed run config)."""
    grpo, kl = config.get("grpo") or {}, config.get("kl") or {}  # a config without them (sft, bench) has neither
    found = []
    if grpo.get("num_iterations") == 1 and grpo.get("num_minibatches") == 1:
        found.append(ONE_UPDATE)
    if kl.get("kind", "none") != "none" and kl.get("estimator") == "k1" and kl.get("placement") == "loss" \
            and kl.get("bias_correction") is False:
        found.append(K1_IN_THE_LOSS)
    return found


def inert_reason(config: Mapping[str, Any], knob: str) -> str | None:
    """Why `knob` cannot act under `config`, or None when it can."""
    return next((group.reason for group in inert_knobs(config) if knob in group.knobs), None)


def check_swept_knobs_act(swept: Iterable[str], probes: Sequence[Mapping[str, Any]], preset: str) -> None:
    """A ConfigError naming the first swept key that cannot act in some probe trial config (the probes touch
    every choice and both ends of every range), and the setting that disables it."""
    for knob in swept:
        for probe in probes:
            reason = inert_reason(probe, knob)
            if reason is not None:
                raise ConfigError(f"{preset}: hydra.sweeper.params.{knob}: {reason}; search it where it acts or drop it")


def inert_override_warnings(config: Mapping[str, Any], overrides: Sequence[str]) -> list[str]:
    """One warning line per command-line override (key=value) of a knob that cannot act under `config`."""
    lines = []
    for override in overrides:
        knob = override.partition("=")[0].lstrip("+~")
        reason = inert_reason(config, knob)
        if reason is not None:
            lines.append(f"rookworld: warning: {override}: {reason}")
    return lines
