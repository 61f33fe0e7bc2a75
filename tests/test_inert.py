"""Knobs that cannot act (rookworld/specs/inert.py): the two disabling settings shown on the loss's own terms, a
planted preset refused in one line for each, every shipped preset accepted, and a plain run's warning."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rookworld.config import compose
from rookworld.specs.rules import ConfigError
from rookworld.grpo.kl import kl_per_token
from rookworld.grpo.loss import clipped_surrogate
from rookworld.specs.inert import check_swept_knobs_act, inert_override_warnings
from rookworld.sweep.running.space import SearchSpace

PRESETS = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "sweeps").glob("*.yaml"))
CLIP_LINE = ("sweeps=smoke: hydra.sweeper.params.grpo.epsilon_low: cannot act with grpo.num_iterations=1 and "
             "grpo.num_minibatches=1 (one update per batch: the ratio is 1 and the clip never binds); search it where "
             "it acts or drop it")
K1_LINE = ("sweeps=smoke: hydra.sweeper.params.kl.coef: cannot act with kl.estimator=k1, kl.placement=loss, "
           "kl.bias_correction=false (the k1 penalty's expected gradient is 0: the coefficient only scales noise; use "
           "k2 or k3 in the loss, k1 with kl.bias_correction=true or kl.placement=reward); search it where it acts or "
           "drop it")


def probes(preset: str, *fixed: str, planted: dict[str, str] | None = None) -> tuple[SearchSpace, list]:
    """The preset's search space (with `planted` params added) and its probe trial configs, composed as the
    launcher composes them."""
    base = compose([f"sweeps={preset}", *fixed])
    space = SearchSpace.parse({**base.hydra.sweeper.params, **(planted or {})}, [])
    return space, [compose([f"sweeps={preset}", *fixed, *space.param_overrides(p)]) for p in space.probes()]


def test_at_one_update_per_batch_two_clip_ranges_give_the_same_gradient() -> None:
    """The only update of a batch sees pi_old = pi_theta (the learner's old log-probs are the pass's own,
    detached): the ratio is 1 inside every clip range, so (0.1, 0.15) and (0.3, 0.4) give bitwise-equal loss
    gradients; at a second update (pi_theta moved) they differ."""
    logp = torch.randn(4, 6, generator=torch.Generator().manual_seed(0), requires_grad=True)
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])

    def gradient(old: torch.Tensor, low: float, high: float) -> torch.Tensor:
        per_token, _ = clipped_surrogate(logp, old, advantages, low, high)
        (grad,) = torch.autograd.grad(per_token.sum(), logp)
        return grad

    assert torch.equal(gradient(logp.detach(), 0.1, 0.15), gradient(logp.detach(), 0.3, 0.4))
    moved = logp.detach() - 0.25 * torch.sign(advantages)[:, None]  # the policy after a first update
    assert not torch.equal(gradient(moved, 0.1, 0.15), gradient(moved, 0.3, 0.4))


def test_the_k1_penalty_in_the_loss_has_no_expected_gradient_unlike_k2_and_k3() -> None:
    """Over a categorical policy's own distribution (exact expectation, no sampling), the gradient of
    E_pi[k1] taken as a per-token loss is 0; k2's and k3's are not."""
    logits = torch.tensor([1.0, -0.5, 0.3, 2.0], requires_grad=True)
    reference = torch.log_softmax(torch.tensor([0.2, 0.1, -1.0, 0.5]), 0)

    def expected_loss_gradient(estimator: str) -> torch.Tensor:
        logp = torch.log_softmax(logits, 0)
        loss = (logp.exp().detach() * kl_per_token(logp, reference, estimator)).sum()  # samples' weights: no gradient
        (gradient,) = torch.autograd.grad(loss, logits)
        return gradient

    assert expected_loss_gradient("k1").abs().max() < 1e-7
    assert expected_loss_gradient("k2").abs().max() > 0.05 and expected_loss_gradient("k3").abs().max() > 0.05


def test_a_preset_sweeping_the_clip_at_one_update_per_batch_is_refused_in_one_line() -> None:
    space, configs = probes("smoke", planted={"grpo.epsilon_low": "interval(0.1, 0.3)"})
    with pytest.raises(ConfigError) as error:
        check_swept_knobs_act(space.distributions, configs, "sweeps=smoke")
    assert str(error.value) == CLIP_LINE
    space, configs = probes("smoke", "grpo.num_minibatches=2", planted={"grpo.epsilon_low": "interval(0.1, 0.3)"})
    check_swept_knobs_act(space.distributions, configs, "sweeps=smoke")  # two updates per batch: the clip acts


def test_a_preset_sweeping_the_kl_coefficient_with_k1_in_the_loss_is_refused_in_one_line() -> None:
    space, configs = probes("smoke", "kl.estimator=k1")
    with pytest.raises(ConfigError) as error:
        check_swept_knobs_act(space.distributions, configs, "sweeps=smoke")
    assert str(error.value) == K1_LINE and "\n" not in K1_LINE
    for acting in (["kl.estimator=k1", "kl.placement=reward"], ["kl.estimator=k1", "kl.bias_correction=true"],
                   ["kl.estimator=k3"]):
        space, configs = probes("smoke", *acting)
        check_swept_knobs_act(space.distributions, configs, "sweeps=smoke")


@pytest.mark.parametrize("preset", PRESETS)
def test_every_shipped_preset_sweeps_only_knobs_that_can_act(preset: str) -> None:
    space, configs = probes(preset)
    check_swept_knobs_act(space.distributions, configs, f"sweeps={preset}")


def test_a_plain_run_warns_of_a_knob_set_on_the_command_line_that_cannot_act() -> None:
    overrides = ["grpo.epsilon_low=0.1", "optimizer.lr=1e-4", "kl=fixed", "kl.estimator=k1", "kl.coef=0.2"]
    assert inert_override_warnings(compose(overrides), overrides) == [
        "rookworld: warning: grpo.epsilon_low=0.1: cannot act with grpo.num_iterations=1 and grpo.num_minibatches=1 "
        "(one update per batch: the ratio is 1 and the clip never binds)",
        "rookworld: warning: kl.coef=0.2: " + K1_LINE.split(": ", 2)[2].removesuffix("; search it where it acts or drop it")]
    assert inert_override_warnings(compose([*overrides, "grpo.num_iterations=2"]), overrides[:1]) == []
