"""The paired statistics of sweep decisions: the one-sided tests, their lower bounds, Holm's
correction and the seeds a difference needs, checked against exact values and scipy's own tests."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rookworld.stats.paired import (compare, fewest_seeds_to_decide, holm, lower_bound, one_sided_p, paired_differences,
                                    signed_rank_critical_value)
from rookworld.stats.sample_size import detectable_difference, paired_power, power_table, seeds_needed


def test_holm_adjusts_known_p_values_in_their_input_order():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> running max 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    assert holm([0.02]) == [0.02]


def test_pairs_are_matched_by_seed_not_by_position():
    candidate = {0: 0.61, 1: 0.62, 2: 0.63}
    reference = {2: 0.60, 1: 0.60, 0: 0.60, 7: 0.10}
    assert paired_differences(candidate, reference) == pytest.approx([0.01, 0.02, 0.03])
    with pytest.raises(ValueError, match="at least 2 shared seeds"):
        compare({0: 0.6, 1: 0.6}, {1: 0.5, 2: 0.5}, test="wilcoxon")


def test_one_sided_p_values():
    assert one_sided_p(np.arange(1, 11) * 0.001, "wilcoxon") == 2.0 ** -10  # all ten better: exact
    assert one_sided_p(-np.arange(1, 11) * 0.001, "wilcoxon") == 1.0
    assert one_sided_p(np.zeros(10), "wilcoxon") == 1.0  # identical configurations
    assert one_sided_p(np.zeros(10), "t") == 1.0
    assert one_sided_p(np.full(5, 0.01), "t") == 0.0
    differences = np.array([0.012, -0.004, 0.020, 0.007, 0.015, -0.001, 0.009])
    assert one_sided_p(differences, "t") == pytest.approx(stats.ttest_1samp(differences, 0, alternative="greater").pvalue)
    with pytest.raises(ValueError, match="unknown paired test"):
        one_sided_p(differences, "sign")


@pytest.mark.parametrize("alpha, fewest", [(0.05, 5), (0.01, 7), (0.1, 4)])
def test_wilcoxon_cannot_decide_on_fewer_seeds(alpha, fewest):
    assert fewest_seeds_to_decide(alpha, "wilcoxon") == fewest
    assert one_sided_p(np.full(fewest, 0.01), "wilcoxon") <= alpha
    assert one_sided_p(np.full(fewest - 1, 0.01), "wilcoxon") > alpha
    assert fewest_seeds_to_decide(alpha, "t") == 2


@pytest.mark.parametrize("test", ["wilcoxon", "t"])
def test_the_lower_bound_inverts_its_own_test_and_covers_the_truth(test):
    """The one-sided bound at a level excludes 0 exactly when the test rejects at that level; on ten seeds from
    N(0.01, 0.003) it lies below 0.01 in about 1 - level of 2,000 draws (the signed-rank bound is of the centre,
    which is the mean for symmetric differences)."""
    rng = np.random.default_rng(0)
    draws = rng.normal(0.01, 0.003, size=(2000, 10))
    below = np.mean([lower_bound(d, 0.05, test) <= 0.01 for d in draws])
    assert 0.93 <= below <= 0.975
    for differences in rng.normal(0.002, 0.003, size=(300, 10)):
        assert (lower_bound(differences, 0.01, test) > 0) == (one_sided_p(differences, test) <= 0.01)
    assert lower_bound(np.full(6, 0.01), 0.01, "wilcoxon") == -np.inf  # six seeds cannot reach p <= 0.01


def test_the_difference_detectable_at_power_08_is_where_the_power_reaches_08():
    for test in ("wilcoxon", "t"):
        detectable = detectable_difference(10, 0.003, alpha=0.01, power=0.8, test=test)
        assert paired_power(10, detectable, 0.003, alpha=0.01, test=test) >= 0.8
        assert paired_power(10, detectable * 0.97, 0.003, alpha=0.01, test=test) < 0.8


def test_paired_t_sample_size_matches_the_textbook():
    # one-sample / paired t, effect size d = 0.5, power 0.8: 27 one-sided at 0.05, 34 at 0.025
    assert seeds_needed(0.005, 0.010, alpha=0.05, power=0.8, test="t") == 27
    assert seeds_needed(0.005, 0.010, alpha=0.025, power=0.8, test="t") == 34


@pytest.mark.parametrize("seeds, alpha", [(5, 0.05), (8, 0.05), (12, 0.01)])
def test_signed_rank_critical_value_agrees_with_scipys_exact_test(seeds, alpha):
    def exact_p(rank_sum: int) -> float:
        signs, left = np.full(seeds, -1.0), rank_sum  # ranks 1..n; the largest ranks positive first
        for rank in range(seeds, 0, -1):
            if rank <= left:
                signs[rank - 1], left = 1.0, left - rank
        return stats.wilcoxon(signs * np.arange(1, seeds + 1), alternative="greater", method="exact").pvalue

    critical = signed_rank_critical_value(seeds, alpha)
    assert exact_p(critical) <= alpha < exact_p(critical - 1)


def test_wilcoxon_power_on_five_seeds_is_all_five_better():
    assert paired_power(5, 0.015, 0.010, alpha=0.05, test="wilcoxon") == pytest.approx(stats.norm.cdf(1.5) ** 5, abs=0.012)
    assert paired_power(4, 0.1, 0.010, alpha=0.05, test="wilcoxon") == 0.0


def test_the_seeds_a_difference_needs_give_scipys_wilcoxon_its_power():
    seeds = seeds_needed(0.01, 0.010, alpha=0.05, power=0.8, test="wilcoxon")
    rng = np.random.default_rng(1)
    rejected = stats.wilcoxon(rng.normal(0.01, 0.010, (1000, seeds)), alternative="greater", axis=1).pvalue <= 0.05
    fewer = stats.wilcoxon(rng.normal(0.01, 0.010, (1000, seeds - 1)), alternative="greater", axis=1).pvalue <= 0.05
    assert rejected.mean() >= 0.77
    assert fewer.mean() < rejected.mean()


def test_power_table():
    table = power_table([0.01, 0.03], [0.007, 0.0045], alpha=0.05, power=0.8, test="t").splitlines()
    assert table[0] == "| difference | sd 0.007 | sd 0.0045 |"
    assert table[2] == f"| 0.010 | {seeds_needed(0.01, 0.007, alpha=0.05, power=0.8, test='t')} | " \
                       f"{seeds_needed(0.01, 0.0045, alpha=0.05, power=0.8, test='t')} |"
    assert len(table) == 4
