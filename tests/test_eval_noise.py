"""The noise table's decomposition (rookworld/stats/eval_noise.py) on simulated evaluations with a planted
training spread: per-problem 0/1 scores drawn with chance difficulty + the seed's effect."""
import numpy as np
import pytest

from rookworld.judge.evaluate import score_standard_error
from rookworld.stats.eval_noise import noise_row, noise_table, smallest_size

PROBLEMS = 1500  # of each task, as the validation part


def _simulated(seeds: int, training_sd: float, rng_seed: int = 0) -> tuple[list[str], list[list[float]]]:
    rng = np.random.default_rng(rng_seed)
    tasks = ["P"] * PROBLEMS + ["A"] * PROBLEMS
    difficulty = rng.uniform(0.2, 0.8, size=len(tasks))
    effects = rng.normal(0.0, training_sd, size=seeds)
    runs = [(rng.random(len(tasks)) < np.clip(difficulty + effect, 0, 1)).astype(float).tolist()
            for effect in effects]
    return tasks, runs


def test_the_training_spread_is_recovered_and_the_evaluation_noise_falls_with_the_size():
    tasks, runs = _simulated(seeds=16, training_sd=0.03)
    rows = noise_table(tasks, runs, [64, 256, 1500])
    small, _, full = rows
    assert full.training == pytest.approx(0.03, rel=0.4)  # 16 seeds: the sd's own error is ~18%
    assert small.noise > 2 * full.noise  # ~1/sqrt(N): sqrt(1500/64) = 4.8
    for row in rows:
        assert row.observed ** 2 == pytest.approx(row.training ** 2 + row.noise ** 2) or row.training == 0
        assert row.absolute_se > row.noise  # the positions every run finds hard cancel in a comparison
    assert smallest_size(rows) == 1500  # noise ~0.009 at 1,500, ~0.02 at 256
    assert smallest_size(rows, max_ratio=10.0) == 64


def test_runs_that_differ_only_by_chance_problem_outcomes_have_no_training_spread_to_speak_of():
    tasks, runs = _simulated(seeds=16, training_sd=0.0)
    full = noise_row(tasks, runs, 1500)
    assert full.training < full.noise


def test_a_size_is_the_first_n_problems_of_each_task_as_the_evaluation_takes_them():
    tasks = ["P", "P", "P", "A", "A", "A"]
    runs = [[1, 0, 1, 1, 1, 0], [0, 0, 1, 1, 0, 0]]
    row = noise_row(tasks, runs, 2)
    assert row.mean == pytest.approx(0.5 * ((0.5 + 1.0) / 2 + (0.0 + 0.5) / 2))
    assert row.absolute_se == pytest.approx(0.5 * (score_standard_error(["P", "P", "A", "A"], [1, 0, 1, 1])
                                                  + score_standard_error(["P", "P", "A", "A"], [0, 0, 1, 0])))


@pytest.mark.parametrize("runs, size, message", [
    ([[1.0, 0.0, 1.0, 0.0]], 2, "1 seeds"),
    ([[1.0, 0.0, 1.0, 0.0]] * 2, 3, "size=3"),
])
def test_too_few_seeds_or_problems_is_one_line(runs, size, message):
    with pytest.raises(ValueError, match=message):
        noise_row(["P", "P", "A", "A"], runs, size)
