"""Knobs that cannot act (rookworld/specs/inert.py): the disabling settings shown on the loss's own terms and by
training 3 steps for every pair claimed exact, planted presets refused in one line, every shipped preset and
experiment accepted, and a plain run's warning naming where each knob was set."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from rookworld.run.build import build_run
from rookworld.app.config import CONF_DIR, compose, load_run, value_sources
from rookworld.specs.rules import ConfigError
from rookworld.grpo.kl import kl_per_token
from rookworld.grpo.loss import clipped_surrogate
from rookworld.specs.inert import INERT, check_space_knobs_act, inert_warnings, plain
from rookworld.sweep.running.space import SearchSpace
from rookworld.tracking import make_tracker
from train_helpers import tiny_config

REPO = Path(__file__).resolve().parents[1]
PRESETS = sorted(p.stem for p in (REPO / "sweeps").glob("*.yaml"))
EXPERIMENTS = [*sorted(p.stem for p in (REPO / "conf" / "experiment").glob("grpo_*.yaml")), "quickstart"]  # GRPO runs
CLIP_LINE = ("sweeps=smoke: hydra.sweeper.params.grpo.epsilon_low: cannot act with grpo.num_iterations=1 and "
             "grpo.num_minibatches=1 (one update per batch: the ratio is 1 and the clip never binds); search it where "
             "it acts or drop it")
K1_REASON = ("cannot act with kl.estimator=k1, kl.placement=loss and kl.bias_correction=false (the k1 penalty's expected "
             "gradient is 0: the coefficient only scales noise; use k2 or k3 in the loss, k1 with "
             "kl.bias_correction=true or kl.placement=reward)")
K1_LINE = f"sweeps=smoke: hydra.sweeper.params.kl.coef: {K1_REASON}; search it where it acts or drop it"
SCALE_LINE = ("sweeps=verdict: hydra.sweeper.params.grpo.scale_rewards: cannot act with "
              "grpo.reward_aggregation=normalize_then_sum (each criterion is normalised in its group and the sum over "
              "the batch: no reward is scaled); search it where it acts or drop it")
# Another value for every knob an exact entry claims inert: its weights after 3 steps must equal the base run's.
OTHER_VALUE = {"grpo.epsilon_low": 0.1, "grpo.epsilon_high": 0.4, "grpo.scale_rewards": "none",
               "grpo.entropy.target": 9.0, "grpo.entropy.delta": 0.05, "grpo.entropy.min": 0.01,
               "grpo.entropy.max": 0.5, "kl.warmup_factor": 0.5, "kl.warmup_steps": 2, "kl.sync_alpha": 0.1,
               "grpo.sampler_correction.cap": 1.5, "grpo.dynamic_sampling.max_rounds": 2,
               "grpo.reward_norm.momentum": 0.5, "difficulty.low": 0.2, "difficulty.high": 0.8,
               "difficulty.out_of_band_weight": 0.5}
EXACT = [(entry, knob) for entry in INERT if entry.exact for knob in entry.knobs]
# Every exact entry's setting at once: A: problems only (their rewards vary), 3 steps at a learning rate that moves.
BASE = ["task_mix=env_only", "optimizer.lr=1e-3", "steps=3",
        *dict.fromkeys(f"{key}={plain(value)}" for entry in INERT if entry.exact for key, value in entry.when)]


def sources(*overrides: str) -> dict[str, str]:
    with initialize_config_dir(config_dir=str(CONF_DIR)):
        return value_sources(GlobalHydra.instance().config_loader(), list(overrides))


def check(preset: str, *fixed: str, planted: dict[str, str] | None = None) -> None:
    """The launcher's inert-knob check of the preset's search space (with `planted` params added), its probe trial
    composed as the launcher composes it."""
    base = compose([f"sweeps={preset}", *fixed])
    space = SearchSpace.parse({**base.hydra.sweeper.params, **(planted or {})}, [])
    trial = compose([f"sweeps={preset}", *fixed, *space.param_overrides(space.probes()[0])])
    check_space_knobs_act(space.takes(), trial, sources(f"sweeps={preset}", *fixed), f"sweeps={preset}")


def trained(tmp_path: Path, *overrides: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The tiny model's weights before and after 3 GRPO steps of BASE + `overrides` on the CPU."""
    cfg = tiny_config(tmp_path, *BASE, *overrides)
    trainer = build_run(load_run(cfg), make_tracker(cfg))
    start = [p.detach().clone() for p in trainer.policy.parameters()]
    for step in range(3):
        trainer.train_step(step)
    return start, [p.detach().clone() for p in trainer.policy.parameters()]


@pytest.fixture(scope="module")
def base_weights(tmp_path_factory: pytest.TempPathFactory) -> list[torch.Tensor]:
    """The base run's weights after its 3 steps; it learned (they moved), so equal weights are no accident."""
    start, end = trained(tmp_path_factory.mktemp("inert-base"))
    assert any(not torch.equal(a, b) for a, b in zip(start, end))
    return end


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


def test_every_exact_knob_has_another_value_to_train() -> None:
    assert sorted(OTHER_VALUE) == sorted(knob for _, knob in EXACT)


@pytest.mark.slow
@pytest.mark.parametrize("knob", [knob for _, knob in EXACT])
def test_an_inert_knob_at_another_value_trains_bitwise_equal_weights(tmp_path: Path, base_weights, knob: str) -> None:
    """3 steps with every exact entry's setting: the knob at another value gives the base run's weights bit for
    bit."""
    _, other = trained(tmp_path, f"{knob}={plain(OTHER_VALUE[knob])}")
    assert all(torch.equal(a, b) for a, b in zip(base_weights, other)), knob


def test_a_preset_sweeping_the_clip_at_one_update_per_batch_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as error:
        check("smoke", planted={"grpo.epsilon_low": "interval(0.1, 0.3)"})
    assert str(error.value) == CLIP_LINE
    check("smoke", "grpo.num_minibatches=2", planted={"grpo.epsilon_low": "interval(0.1, 0.3)"})  # the clip acts
    with pytest.raises(ConfigError, match="^sweeps=smoke: hydra.sweeper.params.grpo.epsilon_low: cannot act"):
        check("smoke", planted={"grpo.epsilon_low": "interval(0.1, 0.3)", "grpo.num_minibatches": "choice(1, 2)"})


def test_a_preset_sweeping_the_kl_coefficient_with_k1_in_the_loss_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as error:
        check("smoke", "kl.estimator=k1")
    assert str(error.value) == K1_LINE and "\n" not in K1_LINE
    for acting in (["kl.estimator=k1", "kl.placement=reward"], ["kl.estimator=k1", "kl.bias_correction=true"],
                   ["kl.estimator=k3"]):
        check("smoke", *acting)


def test_a_preset_searching_both_advantage_knobs_is_refused_in_one_line() -> None:
    """scale_rewards beside reward_aggregation (as recipe_search and verdict searched them): some trials draw
    normalize_then_sum, where the scaling cannot act, whatever the probes' diagonal."""
    for choices in ("choice(group, batch, none)", "choice(none, group)"):
        with pytest.raises(ConfigError) as error:
            check("verdict", planted={"grpo.scale_rewards": choices})
        assert str(error.value) == SCALE_LINE


def test_a_fixed_knob_that_cannot_act_in_any_trial_is_refused_naming_its_source() -> None:
    with pytest.raises(ConfigError) as error:
        check("smoke", "grpo.epsilon_low=0.1")
    assert str(error.value) == (
        "sweeps=smoke: grpo.epsilon_low=0.1 (the command line): cannot act with grpo.num_iterations=1 and "
        "grpo.num_minibatches=1 (one update per batch: the ratio is 1 and the clip never binds); set it where it acts "
        "or drop it")
    check("smoke", "grpo.epsilon_low=0.1", planted={"grpo.num_minibatches": "choice(1, 2)"})  # it acts in some trials
    check("verdict")  # its fixed grpo.scale_rewards acts where reward_aggregation draws sum_then_normalize


@pytest.mark.parametrize("preset", PRESETS)
def test_every_shipped_preset_searches_and_fixes_only_knobs_that_can_act(preset: str) -> None:
    check(preset)


def test_the_sources_of_values_are_the_experiment_group_shape_and_command_line_not_the_groups() -> None:
    found = sources("experiment=grpo_rookworld_tiny_swept", "group_shape=g8_p32", "kl.coef=0.1", "kl=fixed")
    assert found["grpo.loss_type"] == "experiment=grpo_rookworld_tiny_swept"
    assert found["grpo.group_size"] == found["prompts_per_step"] == "group_shape=g8_p32"  # after the experiment
    assert found["kl.coef"] == "the command line"
    assert found["kl.estimator"] == "experiment=grpo_rookworld_tiny_swept"
    assert not {"grpo.epsilon_low", "grpo.num_iterations", "kl.warmup_steps"} & found.keys()  # their groups' defaults


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_no_shipped_experiment_sets_a_knob_that_cannot_act(experiment: str) -> None:
    overrides = [f"experiment={experiment}"]
    assert inert_warnings(compose(overrides), sources(*overrides)) == []


def test_a_plain_run_warns_of_every_knob_set_that_cannot_act_naming_where_it_was_set() -> None:
    overrides = ["experiment=grpo_rookworld_tiny", "grpo.epsilon_low=0.1", "optimizer.lr=1e-4", "kl.estimator=k1"]
    assert inert_warnings(compose(overrides), sources(*overrides)) == [
        f"rookworld: warning: kl.coef=0.01 (experiment=grpo_rookworld_tiny): {K1_REASON}",
        "rookworld: warning: grpo.epsilon_low=0.1 (the command line): cannot act with grpo.num_iterations=1 and "
        "grpo.num_minibatches=1 (one update per batch: the ratio is 1 and the clip never binds)"]
    overrides += ["grpo.num_iterations=2", "kl.estimator=k3"]
    assert inert_warnings(compose(overrides), sources(*overrides)) == []


def test_the_training_command_prints_the_warning_before_it_checks_the_run(tmp_path: Path) -> None:
    """`python -m rookworld.train` as a user types it: the knob the experiment sets is named with its source; the
    run then stops on its bad value as ever (one line, exit 2)."""
    import subprocess
    import sys

    from sweep_helpers import subprocess_env

    result = subprocess.run([sys.executable, "-m", "rookworld.train", "experiment=grpo_rookworld_tiny",
                             "kl.estimator=k1", "tracking=none", "steps=abc"], cwd=tmp_path, env=subprocess_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"rookworld: warning: kl.coef=0.01 (experiment=grpo_rookworld_tiny): {K1_REASON}",
        "rookworld: error: steps='abc': expected an integer"]
