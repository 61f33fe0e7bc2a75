"""Knobs that cannot act under a run's other settings: a sweep refuses them, a plain run warns.

Each entry of INERT is a setting (keys at given values) and the knobs it switches off while the run still
accepts them. Two of them are reasons of the loss itself:

- one update per batch (grpo.num_iterations=1 and grpo.num_minibatches=1): the ratio pi_theta / pi_old is
  exactly 1 at the only update (pi_old is the policy itself), so the clip never binds;
- k1 in the loss (kl.estimator=k1, kl.placement=loss, kl.bias_correction=false): the penalty's gradient is
  beta x grad log pi_theta, whose expectation under the policy's own samples is 0, so kl.coef (and its
  warm-up) only scales noise, never pulls toward the reference (equal weights in expectation only);

the others are switches that are off (a knob of the adaptive entropy bonus while it is fixed, ...). Every
exact entry gives bitwise-equal weights for two values of each of its knobs (tests/test_inert.py trains them).

A plain run warns of each such knob that a source other than its own group's options sets (the command line,
an experiment, a sweep preset, group_shape: rookworld.app.config.value_sources). A sweep refuses a swept knob
whose setting holds in some trial of its space, and a knob its fixed settings give whose setting holds in
every trial. The composed config is read as plain keys (a DictConfig or a mapping of the same shape).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rookworld.specs.rules import ConfigError


@dataclass(frozen=True)
class InertKnobs:
    knobs: tuple[str, ...]                # the dotted keys that cannot act
    when: tuple[tuple[str, Any], ...]     # the setting that switches them off: each key at its value
    why: str                              # what the setting does to them
    exact: bool = True                    # two values give bitwise-equal weights (False: equal in expectation)

    @property
    def setting(self) -> str:
        pairs = [f"{key}={plain(value)}" for key, value in self.when]
        return pairs[0] if len(pairs) == 1 else ", ".join(pairs[:-1]) + " and " + pairs[-1]

    @property
    def reason(self) -> str:
        return f"cannot act with {self.setting} ({self.why})"

    def holds(self, config: Mapping[str, Any]) -> bool:
        return all(same(select(config, key), value) for key, value in self.when)


INERT = (
    InertKnobs(("grpo.epsilon_low", "grpo.epsilon_high"), (("grpo.num_iterations", 1), ("grpo.num_minibatches", 1)),
               "one update per batch: the ratio is 1 and the clip never binds"),
    InertKnobs(("kl.coef", "kl.warmup_steps", "kl.warmup_factor"),
               (("kl.estimator", "k1"), ("kl.placement", "loss"), ("kl.bias_correction", False)),
               "the k1 penalty's expected gradient is 0: the coefficient only scales noise; use k2 or k3 in the "
               "loss, k1 with kl.bias_correction=true or kl.placement=reward", exact=False),
    InertKnobs(("grpo.scale_rewards",), (("grpo.reward_aggregation", "normalize_then_sum"),),
               "each criterion is normalised in its group and the sum over the batch: no reward is scaled"),
    InertKnobs(("grpo.entropy.target", "grpo.entropy.delta", "grpo.entropy.min", "grpo.entropy.max"),
               (("grpo.entropy.adaptive", False),), "the entropy bonus keeps grpo.entropy.coef: nothing adapts it"),
    InertKnobs(("kl.warmup_factor",), (("kl.warmup_steps", 0),), "no warm-up step uses the factor"),
    InertKnobs(("kl.warmup_steps",), (("kl.warmup_factor", 1.0),), "the warm-up multiplies the coefficient by 1"),
    InertKnobs(("kl.sync_alpha",), (("kl.sync_every", 0),), "the reference is never mixed toward the policy"),
    InertKnobs(("grpo.sampler_correction.cap",), (("grpo.sampler_correction.mode", "none"),),
               "no importance weight is computed to cap"),
    InertKnobs(("grpo.dynamic_sampling.max_rounds",), (("grpo.dynamic_sampling.enabled", False),),
               "every step samples one round"),
    InertKnobs(("grpo.reward_norm.momentum",), (("grpo.reward_norm.enabled", False),), "no running mean or std"),
    InertKnobs(("difficulty.low", "difficulty.high", "difficulty.out_of_band_weight"), (("difficulty.filter", False),),
               "every drawn problem is trained, whatever its pass rate"),
)


def select(config: Mapping[str, Any], key: str) -> Any:
    """The value at dotted `key` of a nested mapping; None where a part is absent (a config without the group)."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def same(a: Any, b: Any) -> bool:
    """Equal values of the same kind: a bool is never the number 0 or 1 (1 and 1.0 are the same number)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def plain(value: Any) -> str:
    """A value as a config file writes it (true, null, 0.2)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def inert_reason(config: Mapping[str, Any], knob: str) -> str | None:
    """Why `knob` cannot act under `config`, or None when it can."""
    return next((entry.reason for entry in INERT if knob in entry.knobs and entry.holds(config)), None)


def check_space_knobs_act(takes: Mapping[str, Callable[[Any], bool]], trial: Mapping[str, Any],
                          sources: Mapping[str, str], preset: str) -> None:
    """A ConfigError naming the first knob of a sweep that cannot act. `takes`: each swept key and whether its
    trials can draw a value; `trial`: a composed trial config (for the keys the sweep does not search);
    `sources`: the knobs its fixed settings give, and where from. A swept knob is refused when its setting holds
    in some trial of the space (the keys are searched independently), a fixed one when it holds in every trial."""
    def can_hold(entry: InertKnobs) -> bool:
        return all(takes[key](value) if key in takes else same(select(trial, key), value) for key, value in entry.when)

    for entry in INERT:
        for knob in entry.knobs:
            if knob in takes and can_hold(entry):
                raise ConfigError(f"{preset}: hydra.sweeper.params.{knob}: {entry.reason}; search it where it acts "
                                  f"or drop it")
            if knob in sources and knob not in takes and not any(key in takes for key, _ in entry.when) \
                    and entry.holds(trial):
                raise ConfigError(f"{preset}: {knob}={plain(select(trial, knob))} ({sources[knob]}): {entry.reason}; "
                                  f"set it where it acts or drop it")


def inert_warnings(config: Mapping[str, Any], sources: Mapping[str, str]) -> list[str]:
    """One warning line per knob that a source other than its own group's options sets (`sources`: knob ->
    where from) and that cannot act under `config`."""
    lines = []
    for knob, source in sources.items():
        reason = inert_reason(config, knob)
        if reason is not None:
            lines.append(f"rookworld: warning: {knob}={plain(select(config, knob))} ({source}): {reason}")
    return lines
