"""Divergence detectors: each fires on a series built for it and on no healthy series; through the real
trainer, the KL-growth detector stops a run before kl.max."""
import math
import random

import pytest
from hydra import compose, initialize_config_dir

from rookworld.app.config import validate
from rookworld.specs.rules import ConfigError
from rookworld.grpo.guards import Detectors
from rookworld.outcomes import (DIVERGED_ENTROPY, DIVERGED_GRAD_NORM, DIVERGED_KL_GROWTH, DIVERGED_REWARD, KL_FAILURE,
                                NAN_FAILURE)
from rookworld.train import run
from train_helpers import CONF_DIR, tiny_config

KL_MAX = 5.0


def default_guards(*overrides: str):
    with initialize_config_dir(config_dir=CONF_DIR):
        return compose("config", overrides=list(overrides)).guards


def healthy_series(steps: int = 200, seed: int = 0) -> list[dict[str, float]]:
    """A learning run: KL settling near 0.05, entropy drifting down by half, noisy grad norms, reward rising."""
    rng = random.Random(seed)
    series = []
    for t in range(steps):
        series.append({
            "kl": 0.0 if t == 0 else 0.05 * (1 - math.exp(-t / 10)) * rng.uniform(0.6, 1.4),
            "entropy": (1.0 - 0.5 * t / steps) * rng.uniform(0.7, 1.3),
            "grad_norm": rng.lognormvariate(0.0, 0.5),
            "reward": 0.2 + 0.3 * t / steps + rng.uniform(-0.25, 0.25),
            "loss": rng.uniform(-0.1, 0.1),
        })
    return series


def first_stop(guards: Detectors, series, nonfinite_steps=()) -> tuple[int, tuple[str, str]] | None:
    for step, metrics in enumerate(series, start=1):
        stop = guards.check(metrics, step in nonfinite_steps)
        if stop is not None:
            return step, stop
    return None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_detector_fires_on_a_healthy_run(seed):
    assert first_stop(Detectors(default_guards(), KL_MAX, 2), healthy_series(seed=seed)) is None


def with_changes(series, start: int, **change) -> list[dict[str, float]]:
    """The healthy series, each named metric replaced from `start` on by change[name](t, value)."""
    return [{k: change[k](t, v) if k in change and t >= start else v for k, v in m.items()}
            for t, m in enumerate(series)]


def test_kl_growth_fires_before_kl_max_is_crossed():
    # KL doubling every 3 steps from step 40 on: crosses kl.max = 5 at about step 60
    series = with_changes(healthy_series(), 40, kl=lambda t, v: 0.05 * 2 ** ((t - 40) / 3))
    crossing = next(t for t, m in enumerate(series, start=1) if m["kl"] > KL_MAX)
    step, (outcome, reason) = first_stop(Detectors(default_guards(), KL_MAX, 2), series)
    assert outcome == DIVERGED_KL_GROWTH and step < crossing
    assert series[step - 1]["kl"] < KL_MAX and "kl.max=5" in reason
    # without the growth detector, the ceiling stops it only once it is above kl.max
    late, (ceiling, _) = first_stop(Detectors(default_guards("guards.kl_growth.window=0"), KL_MAX, 2), series)
    assert ceiling == KL_FAILURE and late > crossing


@pytest.mark.parametrize(("kl", "step", "says"), [
    ([0.0, 0.3, 2.7], 3, "mean kl of the last 3 steps 1 >= the kl of 0 the run starts at, and >= 0.5 (0.1 x kl.max=5)"),
    ([0.1] * 5 + [1.0] * 5, 8, "mean kl of the last 5 steps 0.64 >= 2 x 0.1, the mean of the 3 steps before, and "
                               ">= 0.5 (0.1 x kl.max=5)")])
def test_the_kl_growth_reason_names_the_steps_it_compared(kl, step, says):
    """A run shorter than the window compares its few steps with the kl of 0 it starts at, and says so."""
    guards = Detectors(default_guards("guards.kl_growth.window=5", "guards.kl_growth.factor=2",
                                   "guards.kl_growth.min_fraction=0.1"), KL_MAX, 2)
    assert first_stop(guards, [{"kl": value} for value in kl]) == (step, (DIVERGED_KL_GROWTH, says))


def test_a_slow_rise_to_a_steady_high_kl_is_not_growth():
    series = with_changes(healthy_series(), 0, kl=lambda t, v: min(0.02 * t, 2.0))  # 0 -> 2.0 over 100 steps
    assert first_stop(Detectors(default_guards(), KL_MAX, 2), series) is None


@pytest.mark.parametrize("metric, change, outcome", [
    ("entropy", lambda t, v: 0.02, DIVERGED_ENTROPY),
    ("grad_norm", lambda t, v: 50.0, DIVERGED_GRAD_NORM),
    ("reward", lambda t, v: -0.3, DIVERGED_REWARD),
])
def test_each_detector_fires_on_its_own_collapse(metric, change, outcome):
    series = with_changes(healthy_series(), 60, **{metric: change})
    step, (stopped, reason) = first_stop(Detectors(default_guards(), KL_MAX, 2), series)
    assert stopped == outcome and 60 < step <= 72, (step, reason)
    assert metric in reason


def test_a_single_grad_norm_spike_is_tolerated():
    series = with_changes(healthy_series(), 60, grad_norm=lambda t, v: 50.0 if t == 60 else v)
    assert first_stop(Detectors(default_guards(), KL_MAX, 2), series) is None


def test_non_finite_steps_and_the_kl_ceiling():
    series = healthy_series(20)
    step, (outcome, _) = first_stop(Detectors(default_guards(), KL_MAX, 2), series, nonfinite_steps={5, 6, 7})
    assert (step, outcome) == (7, NAN_FAILURE)
    nan_entropy = with_changes(series, 10, entropy=lambda t, v: math.nan)
    assert first_stop(Detectors(default_guards(), KL_MAX, 2), nan_entropy)[1][0] == NAN_FAILURE
    nan_kl = with_changes(series, 10, kl=lambda t, v: math.nan)  # the NaN guard's, though kl.max_steps_above=2 < 3
    assert first_stop(Detectors(default_guards(), KL_MAX, 2), nan_kl) == (13, (NAN_FAILURE, "3 non-finite steps in a row"))
    above = with_changes(series, 10, kl=lambda t, v: 6.0)
    guards = Detectors(default_guards("guards.kl_growth.window=0"), KL_MAX, 2)
    assert first_stop(guards, above) == (12, (KL_FAILURE, "kl=6 > kl.max=5.0 for 2 step(s)"))
    assert first_stop(Detectors(default_guards(), None, 2), above) is None  # kl=none: no KL detectors


def test_guard_state_survives_a_checkpoint():
    series = with_changes(healthy_series(), 60, reward=lambda t, v: -0.3)
    straight = first_stop(Detectors(default_guards(), KL_MAX, 2), series)
    first = Detectors(default_guards(), KL_MAX, 2)
    assert first_stop(first, series[:64]) is None
    resumed = Detectors(default_guards(), KL_MAX, 2)
    resumed.load_state_dict(first.state_dict())
    step, stop = first_stop(resumed, series[64:])
    assert (64 + step, stop) == straight


@pytest.mark.parametrize("override", [
    "guards.max_nonfinite_steps=0", "guards.kl_growth.window=-1", "guards.kl_growth.factor=1",
    "guards.kl_growth.min_fraction=0", "guards.entropy.min_ratio=1.5", "guards.grad_norm.window=abc",
    "guards.grad_norm.steps_above=0", "guards.reward.drop=0",
])
def test_guard_knobs_are_validated_in_one_line(tmp_path, override):
    with pytest.raises(ConfigError, match="^" + override.split("=")[0].replace(".", r"\.") + "="):
        validate(tiny_config(tmp_path, "tracking=none", override))


@pytest.mark.slow
def test_a_real_run_is_stopped_by_kl_growth_before_kl_max(tmp_path, capsys):
    """rookworld_tiny at lr 1e-3: KL 0, 0.31, 5.6 in three steps (a 2-step window's mean grows from 0 to
    2.95, above 0.1 x kl.max), stopped there; kl.max = 20 is never reached."""
    result = run(tiny_config(tmp_path, "task_mix=env_only", "steps=6", "optimizer.lr=1e-3",
                             "optimizer.warmup_steps=0", "kl.max=20.0", "guards.kl_growth.window=2",
                             "guards.kl_growth.min_fraction=0.1"))
    out = capsys.readouterr().out
    assert result.outcome == DIVERGED_KL_GROWTH and result.steps < 6, out
    assert result.objective == -1.0  # objective.failure_penalty
    kls = [float(line.split("kl ")[1].split()[0]) for line in out.splitlines() if line.startswith("step ")]
    assert len(kls) == result.steps and max(kls) < 20.0
    assert f"outcome: {DIVERGED_KL_GROWTH}" in out
