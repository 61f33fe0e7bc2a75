"""The sweep's stages on real components: paired seeds, rungs as prefixes of the full run, and the knobs.

The end-to-end staged sweep (search on paired seeds with rungs, race, confirmation, report, kill and
resume) is in tests/test_stages_sweep.py."""
from pathlib import Path

import pytest
import torch

from rookworld.components import build_trainer
from rookworld.config import ConfigError, load_run
from rookworld.tracking import make_tracker
from train_helpers import tiny_config

PREFIX_RUN = ["steps=3", "task_mix=env_only", "kl=fixed", "kl.coef=0.05", "kl.warmup_steps=2", "eval.every=0",
              "optimizer.lr=1e-4", "optimizer.warmup_steps=1", "optimizer.min_lr_ratio=0.1", "eval.num_policy=0",
              "eval.num_arbiter=2", "prompts_per_step=1", "data.arbiter_pool_size=4", "data.arbiter_pool_walks=200"]


def make_trainer(tmp_path: Path, *overrides: str):
    cfg = tiny_config(tmp_path, *overrides)
    return build_trainer(load_run(cfg), make_tracker(cfg))


def test_paired_seeds_give_two_configurations_the_same_problem_order(tmp_path: Path) -> None:
    """Seed i is the same for every configuration: the problems a step trains on depend on the seed only,
    not on the configuration's knobs (here the learning rate, KL and temperature)."""
    def order(name: str, seed: int, *knobs: str) -> list[str]:
        trainer = make_trainer(tmp_path / name, "task_mix=balanced", f"seed={seed}", *knobs)
        return [p.prompt_text for _ in range(5) for p in trainer.sample_rows()]

    first = order("a", 3, "optimizer.lr=1e-5")
    second = order("b", 3, "optimizer.lr=3e-4", "kl.coef=0.2", "sampling.temperature=1.3")
    assert first == second
    assert order("c", 4, "optimizer.lr=1e-5") != first, "another seed must give another order"


def test_a_prefix_resumed_to_the_full_horizon_equals_an_uninterrupted_run_bitwise(tmp_path: Path) -> None:
    """A rung: the run stops at stop_at=2 of steps=3 (its LR warm-up and cosine decay, its KL warm-up span
    all 3 steps), evaluates and saves its checkpoint; the promoted configuration resumes from it to step 3
    and ends with the same weights, bit for bit, as a run of 3 steps without a stop."""
    cache = f"eval.cache_dir={tmp_path}/eval_cache"  # the step-0 evaluation, computed once
    straight = make_trainer(tmp_path / "straight", *PREFIX_RUN, cache)
    start = [p.detach().clone() for p in straight.policy.parameters()]
    straight.fit()
    rung = make_trainer(tmp_path / "rung", *PREFIX_RUN, cache, "stop_at=2", "checkpoint.save_final=true")
    result = rung.fit()
    assert (result.steps, result.outcome) == (2, "success") and result.reason == "finished 2 steps of 3"
    checkpoint = tmp_path / "rung" / "checkpoints" / "step_000002"
    promoted = make_trainer(tmp_path / "promoted", *PREFIX_RUN, cache, f"resume_from={checkpoint}")
    assert promoted.step == 2
    promoted.fit()
    assert any(not torch.equal(a, b) for a, b in zip(start, straight.policy.parameters()))
    for (name, a), b in zip(straight.policy.named_parameters(), promoted.policy.parameters()):
        assert torch.equal(a, b), name
    assert promoted.kl.coef == straight.kl.coef


@pytest.mark.parametrize("bad", ["stop_at=0", "stop_at=5"])
def test_stop_at_must_be_a_prefix(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_run(tiny_config(tmp_path, "steps=4", bad))
    assert str(error.value) == f"{bad}: must be null or between 1 and steps = 4 (a prefix of the run)"
