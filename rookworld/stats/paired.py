"""Paired comparison of two configurations over shared seeds.

Seed i is the same training seed for every configuration (the same problem order and sampling
stream, and with eval.draw=blocks the same evaluated positions), so the per-seed differences cancel what
the seeds share. On those differences: a one-sided test that the candidate is better (Wilcoxon
signed-rank or paired t), the lower confidence bound that inverts the same test at a level, and Holm's
correction when several candidates are tested at once. The bound and the test are one procedure: at any
level, "the bound is above 0" and "p <= level" say the same thing, ties and zero differences included
(the signed-rank statistic counts the Walsh averages above 0, and the bound is the Walsh average at the
critical count).
Scores are higher-is-better; a configuration's scores are a mapping seed -> score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
import math

import numpy as np

Scores = Mapping[int, float]
TESTS = ("wilcoxon", "t")


@dataclass(frozen=True)
class Comparison:
    """A candidate against a reference over their shared seeds."""
    seeds: int
    mean_difference: float  # candidate minus reference
    p_value: float  # one-sided: the candidate is better
    differences: tuple[float, ...]  # per shared seed, in seed order

    @property
    def sd(self) -> float:
        """The standard deviation of the paired differences."""
        return float(np.std(self.differences, ddof=1))


def paired_differences(candidate: Scores, reference: Scores) -> np.ndarray:
    """candidate - reference on each seed both have, in seed order."""
    seeds = sorted(candidate.keys() & reference.keys())
    return np.array([candidate[seed] - reference[seed] for seed in seeds], dtype=float)


def one_sided_p(differences: np.ndarray, test: str) -> float:
    """p-value of "the differences lean above zero": the exact Wilcoxon signed-rank test (on any number of
    seeds; a zero difference, or two that cancel, counts against the candidate: signed_rank_statistic) or the paired t-test."""
    check_test(test)
    if test == "wilcoxon":
        return float(signed_rank_upper_tail(len(differences))[signed_rank_statistic(differences)])
    if not np.any(differences):
        return 1.0  # no seed tells the two apart: no evidence either way
    if np.ptp(differences) == 0:
        return 0.0 if differences[0] > 0 else 1.0  # the same difference on every seed: t is infinite
    from scipy import stats  # on first use: ~1 s that every run importing this module would pay
    return float(stats.ttest_1samp(differences, 0.0, alternative="greater").pvalue)


def signed_rank_statistic(differences: np.ndarray) -> np.ndarray | int:
    """W+ over the last axis: how many of the n(n + 1)/2 Walsh averages (d_i + d_j)/2, i <= j, are above 0.
    Without zeros or ties it is the sum of the positive differences' ranks; a zero or a Walsh average of exactly
    0 counts as not above, so the exact null tail of the untied statistic bounds its p-value (conservative)."""
    d = np.asarray(differences, dtype=float)
    upper = np.triu(np.ones((d.shape[-1],) * 2, dtype=bool))
    above = (d[..., :, None] + d[..., None, :] > 0) & upper
    count = above.sum(axis=(-2, -1))
    return int(count) if np.ndim(count) == 0 else count


@lru_cache(maxsize=64)
def signed_rank_upper_tail(seeds: int) -> np.ndarray:
    """tail[w] = P(W+ >= w) with no difference, w = 0 .. n(n + 1)/2 + 1 (the last 0): each rank is in W+ with
    chance 1/2, independently."""
    null = np.zeros(seeds * (seeds + 1) // 2 + 1)
    null[0] = 1.0
    for rank in range(1, seeds + 1):
        null[rank:] = (null[rank:] + null[:-rank]) / 2  # the right side is a new array
        null[:rank] /= 2
    tail = np.append(np.cumsum(null[::-1])[::-1], 0.0)
    tail.flags.writeable = False
    return tail


def lower_bound(differences: np.ndarray, level: float, test: str) -> float:
    """The one-sided (1 - level) lower confidence bound of the difference that inverts the test at `level`: the
    shifts it would not reject, so that the bound is above 0 exactly when p <= level. Paired t: mean - t(1 - level)
    x sd / sqrt(n) (of the mean). Signed rank: the c-th largest of the M = n(n + 1)/2 Walsh averages, c the exact
    critical value of W+ (of the centre of the differences' distribution); -inf when n seeds cannot reach
    p <= level at all."""
    check_test(test)
    n = len(differences)
    if test == "t":
        from scipy import stats  # on first use: ~1 s that every run importing this module would pay
        spread = float(np.std(differences, ddof=1)) / math.sqrt(n)
        return float(differences.mean()) - float(stats.t.ppf(1 - level, n - 1)) * spread
    critical = signed_rank_critical_value(n, level)
    walsh = np.sort((differences[:, None] + differences[None, :])[np.triu_indices(n)] / 2)
    return -math.inf if critical > len(walsh) else float(walsh[len(walsh) - critical])


def compare(candidate: Scores, reference: Scores, *, test: str) -> Comparison:
    """The candidate against the reference on their shared seeds (at least 2)."""
    differences = paired_differences(candidate, reference)
    if len(differences) < 2:
        raise ValueError(f"a paired comparison needs at least 2 shared seeds, got {len(differences)}")
    return Comparison(seeds=len(differences), mean_difference=float(differences.mean()),
                      p_value=one_sided_p(differences, test), differences=tuple(float(d) for d in differences))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: reject where adjusted p <= alpha and
    the chance of any false rejection among the tests stays at most alpha."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def signed_rank_critical_value(seeds: int, alpha: float) -> int:
    """The smallest signed-rank count W+ whose exact one-sided p-value, P(W+ >= it | no difference), is at
    most alpha; n(n + 1)/2 + 1 (beyond every count) when none is."""
    return int(np.argmax(signed_rank_upper_tail(seeds) <= alpha))


def fewest_seeds_to_decide(alpha: float, test: str) -> int:
    """The fewest paired seeds at which the test can reach p <= alpha at all: the signed-rank test's
    smallest one-sided p-value on n seeds is 2**-n (every difference positive); the t-test needs 2."""
    check_test(test)
    return max(2, math.ceil(math.log2(1 / alpha))) if test == "wilcoxon" else 2


def check_test(test: str) -> None:
    """Raise ValueError unless `test` names one of TESTS."""
    if test not in TESTS:
        raise ValueError(f"unknown paired test {test!r}; choose one of {', '.join(TESTS)}")
