"""Difficulty (rookworld/data/difficulty.py): the pass-rate filter and the easy-first curriculum of the
training problems, each against a slow reference that rebuilds every epoch as a whole list; their state
across a resume; the trainer refreshing the estimates; `python -m rookworld.commands.pass_rates`."""
from __future__ import annotations

import json
import random

import pytest

from rookworld.app.config import compose, load_run
from rookworld.data.difficulty import DifficultyState, pass_rates_of, read_pass_rates, write_pass_rates
from rookworld.commands.pass_rates import main as pass_rates_main
from rookworld.data.positions import ProblemSampler, load_arbiter_problems, load_policy_problems
from rookworld.specs.rules import ConfigError
from rookworld.tasks import perfect_completion, solves
from rookworld.run.build import build_run
from rookworld.tracking import make_tracker
from train_helpers import tiny_config

SEED = 3
PROBLEMS = load_policy_problems("train")[:24]
RATES = {p.prompt_text: [0.0, 1.0, 0.5, 0.25][i % 4] for i, p in enumerate(PROBLEMS[:20])}  # 4 never estimated


def sampler(difficulty: Difficulty) -> ProblemSampler:
    return ProblemSampler(PROBLEMS, load_arbiter_problems("validation")[:8], weights={"P": 1.0, "A": 0.0}, seed=SEED,
                          difficulty=difficulty)


def reference_epochs(difficulty: Difficulty, epochs: int) -> list:
    """The P: problems drawn over `epochs` whole epochs, built epoch by epoch: the seeded shuffle, the
    curriculum's sort, then the filter's rule applied to each problem (the estimates fixed)."""
    drawn = []
    for epoch in range(epochs):
        order = list(range(len(PROBLEMS)))
        random.Random(f"{SEED}:P:{epoch}").shuffle(order)
        if difficulty.curriculum == "easy_first":
            position = {index: rank for rank, index in enumerate(order)}
            order = sorted(order, key=lambda i: (-difficulty.starting.get(PROBLEMS[i].prompt_text, -1.0), position[i]))
        for index in order:
            rate = difficulty.estimates.get(PROBLEMS[index].prompt_text)
            inside = rate is None or difficulty.low < rate < difficulty.high
            coin = random.Random(f"{SEED}:keep:{epoch}:{PROBLEMS[index].prompt_text}").random()
            if inside or coin < difficulty.out_of_band_weight:
                drawn.append(PROBLEMS[index])
    return drawn


@pytest.mark.parametrize("weight", [0.0, 0.5])
@pytest.mark.parametrize("curriculum", ["none", "easy_first"])
def test_the_sampler_draws_what_the_epoch_by_epoch_reference_draws(weight: float, curriculum: str) -> None:
    difficulty = DifficultyState(0.0, 1.0, weight, curriculum, RATES, seed=SEED)
    expected = reference_epochs(difficulty, epochs=5)
    live = sampler(difficulty)
    drawn = [p for _ in expected for p in live.sample(1)]  # one at a time: a batch's order is shuffled
    assert [p.prompt_text for p in drawn] == [p.prompt_text for p in expected]
    out_of_band = {prompt for prompt, rate in RATES.items() if rate in (0.0, 1.0)}
    kept = sum(p.prompt_text in out_of_band for p in drawn)
    assert (kept == 0) if weight == 0.0 else 0 < kept < 5 * len(out_of_band)


def test_easy_first_visits_the_starting_pass_rates_from_highest_to_lowest_unknown_last() -> None:
    difficulty = DifficultyState(0.0, 1.0, 1.0, "easy_first", RATES, seed=SEED)
    live = sampler(difficulty)
    epoch = [p.prompt_text for _ in PROBLEMS for p in live.sample(1)]
    rates = [RATES.get(prompt, -1.0) for prompt in epoch]
    assert rates == sorted(rates, reverse=True) and rates[-4:] == [-1.0] * 4


def test_the_filter_follows_the_refreshed_estimates_and_a_resumed_sampler_draws_alike() -> None:
    difficulty = DifficultyState(0.0, 1.0, 0.0, "none", {}, seed=SEED)
    live = sampler(difficulty)
    first = live.sample(6)
    difficulty.record([first[0], first[0], first[1], first[1]], [True, True, False, False], group_size=2)
    assert difficulty.estimates == {first[0].prompt_text: 1.0, first[1].prompt_text: 0.0}
    state = live.state_dict()
    resumed = sampler(DifficultyState(0.0, 1.0, 0.0, "none", {}, seed=SEED))
    resumed.load_state_dict(json.loads(json.dumps(state)))
    later = [p.prompt_text for p in live.sample(40)]
    assert [p.prompt_text for p in resumed.sample(40)] == later
    assert first[0].prompt_text not in later and first[1].prompt_text not in later  # both dropped


def test_a_filter_that_drops_every_problem_says_so() -> None:
    difficulty = DifficultyState(0.0, 1.0, 0.0, "none", {p.prompt_text: 0.0 for p in PROBLEMS}, seed=SEED)
    with pytest.raises(ValueError, match=r"^difficulty.filter: all 24 P: problems are out of band"):
        sampler(difficulty).sample(1)


def test_the_configs_validate_at_the_boundary(tmp_path) -> None:
    assert load_run(compose([])).difficulty.build(0) is None  # none: the sampler as before
    with pytest.raises(ConfigError, match=r"^difficulty.curriculum='easy_first': orders by the starting pass rates"):
        load_run(compose(["difficulty=curriculum"]))
    with pytest.raises(ConfigError, match=r"^difficulty.low=0.5: must be below difficulty.high=0.5"):
        load_run(compose(["difficulty=filter", "difficulty.low=0.5", "difficulty.high=0.5"]))
    with pytest.raises(ConfigError, match=r"^difficulty.pass_rates='nowhere.jsonl': no such file"):
        load_run(compose(["difficulty=filter", "difficulty.pass_rates=nowhere.jsonl"]))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "P: x", "pass_rate": 0.5}\n{"prompt": "P: y"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not a pass-rate row"):
        read_pass_rates(bad)
    with pytest.raises(ConfigError, match=r"^difficulty.pass_rates: .*bad.jsonl:2: not a pass-rate row \('pass_rate'\)$"):
        load_run(compose(["difficulty=filter", f"difficulty.pass_rates={bad}"])).difficulty.build(0)


def test_pass_rates_count_exact_completions_per_group() -> None:
    problem = PROBLEMS[0]
    texts = [perfect_completion(problem), "M: a1a1 E: 0 B: a1a1", perfect_completion(problem), perfect_completion(problem)]
    solved = [solves(problem, text) for text in texts]
    assert solved == [True, False, True, True]
    assert pass_rates_of([problem] * 4, solved, group_size=4) == {problem.prompt_text: 0.75}


def test_a_training_step_refreshes_the_estimates_of_the_problems_it_sampled(tmp_path) -> None:
    cfg = tiny_config(tmp_path, "task_mix=policy_only", "difficulty=filter")  # P: cut at 24 tokens: never solved
    trainer = build_run(load_run(cfg), make_tracker(cfg))
    metrics, _ = trainer.train_step(0)
    assert list(trainer.sampler.difficulty.estimates.values()) == [0.0] * cfg.prompts_per_step
    assert (metrics["difficulty/pass_rate"], metrics["difficulty/in_band"]) == (0.0, 0.0)
    assert metrics["difficulty/estimated"] == cfg.prompts_per_step


def test_the_pass_rate_command_writes_a_file_the_filter_reads(tmp_path, capsys) -> None:
    out = tmp_path / "rates.jsonl"
    pass_rates_main(["--out", str(out), "--problems", "3", "--batch", "2", "model=rookworld_tiny", "device=cpu",
                     "tracking=none", "grpo.group_size=2", "sampling.max_new_tokens.P=24"])
    rates = read_pass_rates(out)
    assert list(rates) == [p.prompt_text for p in PROBLEMS[:3]] and set(rates.values()) == {0.0}  # cut: never exact
    assert "3 problems: none solved 3 (100.0%)" in capsys.readouterr().out
    write_pass_rates(tmp_path / "again.jsonl", rates)
    assert read_pass_rates(tmp_path / "again.jsonl") == rates


