"""Paired comparison of two configurations over shared seeds.

Seed i is the same training seed for every configuration (the same problem order and sampling
stream), so the per-seed differences cancel what the seeds share. On those differences: a one-sided
test that the candidate is better (Wilcoxon signed-rank or paired t), a 95% bootstrap interval of
the mean difference, and Holm's correction when several candidates are tested at once.
Scores are higher-is-better; a configuration's scores are a mapping seed -> score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
import math

import numpy as np
from scipy import stats

Scores = Mapping[int, float]
TESTS = ("wilcoxon", "t")
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0  # fixed, so the same scores always give the same interval (a resumed sweep agrees)


@dataclass(frozen=True)
class Comparison:
    """A candidate against a reference over their shared seeds."""
    seeds: int
    mean_difference: float  # candidate minus reference
    low: float  # the 95% bootstrap interval of the mean difference
    high: float
    p_value: float  # one-sided: the candidate is better


def paired_differences(candidate: Scores, reference: Scores) -> np.ndarray:
    """candidate - reference on each seed both have, in seed order."""
    seeds = sorted(candidate.keys() & reference.keys())
    return np.array([candidate[seed] - reference[seed] for seed in seeds], dtype=float)


def one_sided_p(differences: np.ndarray, test: str) -> float:
    """p-value of "the differences lean above zero": Wilcoxon signed-rank (zeros ranked, Pratt's
    convention; exact up to 13 seeds, ties and zeros included) or the paired t-test."""
    check_test(test)
    if not np.any(differences):
        return 1.0  # no seed tells the two apart: no evidence either way
    if test == "t" and np.ptp(differences) == 0:
        return 0.0 if differences[0] > 0 else 1.0  # the same difference on every seed: t is infinite
    if test == "wilcoxon":
        return float(stats.wilcoxon(differences, alternative="greater", zero_method="pratt").pvalue)
    return float(stats.ttest_1samp(differences, 0.0, alternative="greater").pvalue)


def bootstrap_interval(differences: np.ndarray) -> tuple[float, float]:
    """The 95% BCa bootstrap interval of the mean difference, seeded."""
    if np.ptp(differences) == 0:
        return float(differences[0]), float(differences[0])  # every resample has the same mean
    result = stats.bootstrap((differences,), np.mean, confidence_level=CONFIDENCE, method="BCa",
                             n_resamples=BOOTSTRAP_RESAMPLES, rng=np.random.default_rng(BOOTSTRAP_SEED))
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def compare(candidate: Scores, reference: Scores, *, test: str) -> Comparison:
    """The candidate against the reference on their shared seeds (at least 2)."""
    differences = paired_differences(candidate, reference)
    if len(differences) < 2:
        raise ValueError(f"a paired comparison needs at least 2 shared seeds, got {len(differences)}")
    low, high = bootstrap_interval(differences)
    return Comparison(seeds=len(differences), mean_difference=float(differences.mean()), low=low, high=high,
                      p_value=one_sided_p(differences, test))


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


def fewest_seeds_to_decide(alpha: float, test: str) -> int:
    """The fewest paired seeds at which the test can reach p <= alpha at all: the signed-rank test's
    smallest one-sided p-value on n seeds is 2**-n (every difference positive); the t-test needs 2."""
    check_test(test)
    return max(2, math.ceil(math.log2(1 / alpha))) if test == "wilcoxon" else 2


def check_test(test: str) -> None:
    """Raise ValueError unless `test` names one of TESTS."""
    if test not in TESTS:
        raise ValueError(f"unknown paired test {test!r}; choose one of {', '.join(TESTS)}")
