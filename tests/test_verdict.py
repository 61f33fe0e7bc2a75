"""The verdict against the baseline: its one line, Holm over several finalists, and on simulated
per-seed objectives (tests/seed_simulation.py) its power and its false-winner rate at 10 fresh seeds."""
from __future__ import annotations

import pytest

from rookworld.sweep.paired import Comparison
from rookworld.sweep.verdict import Finalist, Verdict, confirm
from seed_simulation import SimulatedSeeds

FRESH_SEEDS = range(1000, 1010)  # ten seeds no earlier stage used
REPEATS = 200


def test_the_verdict_lines():
    winner = Finalist(162, Comparison(seeds=10, mean_difference=0.021, low=0.012, high=0.030, p_value=0.002), 0.002)
    assert Verdict((winner,), winner).line() == \
        "verdict: trial 162 beats the baseline by +0.021 (95% CI +0.012..+0.030, p = 0.002, 10 seeds)"
    best = Finalist(7, Comparison(seeds=10, mean_difference=0.004, low=-0.006, high=0.013, p_value=0.2), 0.4)
    assert Verdict((best,), None).line() == \
        "verdict: no configuration beats the baseline (best +0.004, 95% CI -0.006..+0.013)"
    tiny = Finalist(9, Comparison(seeds=12, mean_difference=0.03, low=0.02, high=0.04, p_value=0.0002), 0.0002)
    assert Verdict((tiny,), tiny).line().endswith("(95% CI +0.020..+0.040, p < 0.001, 12 seeds)")
    flat = Finalist(3, Comparison(seeds=10, mean_difference=-0.0001, low=-0.0004, high=0.0002, p_value=0.6), 0.6)
    assert Verdict((flat,), None).line() == \
        "verdict: no configuration beats the baseline (best +0.000, 95% CI +0.000..+0.000)"


def test_holm_corrects_the_p_value_of_several_finalists():
    baseline = {seed: 0.60 for seed in FRESH_SEEDS}
    better = {seed: 0.62 + 0.001 * i for i, seed in enumerate(FRESH_SEEDS)}  # better on all ten seeds
    alone = confirm({162: better}, baseline, alpha=0.05, test="wilcoxon")
    assert alone.winner.trial == 162 and alone.winner.adjusted_p == 2.0 ** -10
    assert alone.line() == "verdict: trial 162 beats the baseline by +0.025 (95% CI +0.023..+0.026, p = 0.001, 10 seeds)"
    same = {seed: 0.60 for seed in FRESH_SEEDS}
    three = confirm({162: better, 5: same, 40: same}, baseline, alpha=0.05, test="wilcoxon")
    assert [f.trial for f in three.finalists] == [162, 5, 40]
    assert three.winner.adjusted_p == pytest.approx(3 * 2.0 ** -10)
    assert three.line().endswith("p = 0.003, 10 seeds)")


def test_the_winner_is_the_largest_significant_difference():
    baseline = {seed: 0.60 for seed in FRESH_SEEDS}
    small = {seed: 0.61 + 0.0001 * i for i, seed in enumerate(FRESH_SEEDS)}
    large = {seed: 0.63 + 0.0001 * i for i, seed in enumerate(FRESH_SEEDS)}
    assert confirm({1: small, 2: large}, baseline, alpha=0.05, test="t").winner.trial == 2


def winners(true_means: dict, test: str) -> int:
    """Verdicts naming a winner in REPEATS simulated confirmations."""
    named = 0
    for repeat in range(REPEATS):
        simulation = SimulatedSeeds(true_means, rng_seed=repeat)
        finalists = {trial: simulation.scores(trial, FRESH_SEEDS) for trial in true_means if trial != "baseline"}
        named += confirm(finalists, simulation.scores("baseline", FRESH_SEEDS), alpha=0.05, test=test).winner is not None
    return named


@pytest.mark.parametrize("test", ["wilcoxon", "t"])
def test_confirmation_detects_a_planted_difference_of_0_03_on_ten_seeds(test):
    assert winners({"baseline": 0.60, 162: 0.63}, test) >= 0.8 * REPEATS  # measured: 200 of 200, both tests


def test_confirmation_rarely_names_a_winner_when_there_is_no_difference():
    """The signed-rank test on ten seeds is exact and its size is below alpha (P(W+ >= 45) = 0.042):
    measured 8 of 200 with one finalist, 9 of 200 with three under Holm."""
    assert winners({"baseline": 0.60, 162: 0.60}, "wilcoxon") <= 0.05 * REPEATS
    assert winners({"baseline": 0.60, 162: 0.60, 5: 0.60, 40: 0.60}, "wilcoxon") <= 0.05 * REPEATS


def test_the_paired_t_option_names_a_false_winner_at_its_nominal_rate():
    """The t-test's size is alpha itself, so about half of all 200-repeat samples exceed 10 false
    winners (measured: 13); more than 18 has a chance of 0.6% if its size is 0.05."""
    assert winners({"baseline": 0.60, 162: 0.60}, "t") <= 18
