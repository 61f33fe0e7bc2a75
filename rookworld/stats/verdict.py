"""The verdict: do the finalists beat the baseline on fresh seeds?

Each finalist runs with the baseline on seeds that no earlier stage used, scored on the confirmation's pool
(the final pool, else the test part; with eval.draw=blocks each seed on its own block). Each is compared with the baseline (rookworld.stats.paired:
one-sided paired test); with several finalists, Holm's correction keeps the chance of naming any false
winner at most alpha. The winner is the finalist with the largest mean difference among those whose
adjusted p <= alpha. The verdict is one line: the mean paired difference, the lower bound that the test
itself gives at the finalist's Holm level (rounded down: outward; above 0 exactly when Holm rejects), the test,
its level, its adjusted p,
and the difference it would find with power 0.8 at that level and the differences' sd (rounded up):

    verdict: trial 162 beats the baseline: +0.0210, lower bound +0.012 (one-sided signed-rank test, Holm alpha 0.01, p = 0.001, 10 fresh seeds); detectable with power 0.8: +0.009
    verdict: no configuration beats the baseline: best trial 7, -0.0004, lower bound -0.003 (one-sided signed-rank test, Holm alpha 0.01, p = 0.688, 10 fresh seeds); detectable with power 0.8: +0.004
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rookworld.stats.paired import Comparison, Scores, compare, holm, lower_bound
from rookworld.stats.sample_size import detectable_difference

POWER = 0.8  # the power at which the verdict states the detectable difference
TEST_NAMES = {"wilcoxon": "signed-rank test", "t": "paired t-test"}


@dataclass(frozen=True)
class Finalist:
    trial: int
    comparison: Comparison  # against the baseline; its p_value is the unadjusted one
    adjusted_p: float  # Holm over every finalist of the confirmation
    level: float  # its Holm level (holm_levels): alpha over the finalists not yet rejected when its turn comes
    lower: float  # the test's one-sided (1 - level) lower bound of the difference

    def detectable(self, test: str) -> float:
        """The difference the test finds with power POWER at `level` and the differences' sd."""
        c = self.comparison
        return detectable_difference(c.seeds, c.sd, alpha=self.level, power=POWER, test=test)

    def evidence(self, test: str) -> str:
        c = self.comparison
        return (f"{c.mean_difference:+.4f}, lower bound {outward(self.lower, down=True)} (one-sided {TEST_NAMES[test]}, "
                f"Holm alpha {self.level:.3g}, {_p(self.adjusted_p)}, {c.seeds} fresh seeds); detectable with power "
                f"{POWER:g}: {outward(self.detectable(test), down=False)}")


@dataclass(frozen=True)
class Verdict:
    finalists: tuple[Finalist, ...]  # largest mean difference first
    winner: Finalist | None
    test: str

    def line(self) -> str:
        if self.winner is not None:
            return f"verdict: trial {self.winner.trial} beats the baseline: {self.winner.evidence(self.test)}"
        best = self.finalists[0]
        return f"verdict: no configuration beats the baseline: best trial {best.trial}, {best.evidence(self.test)}"


def confirm(finalists: Mapping[int, Scores], baseline: Scores, *, alpha: float, test: str) -> Verdict:
    """The verdict on the finalists' and the baseline's fresh-seed scores (trial number -> seed ->
    score; higher is better)."""
    if not finalists:
        raise ValueError("a confirmation needs at least one finalist")
    comparisons = {trial: compare(scores, baseline, test=test) for trial, scores in finalists.items()}
    adjusted = holm([c.p_value for c in comparisons.values()])
    levels = holm_levels({trial: c.p_value for trial, c in comparisons.items()}, alpha)
    ranked = sorted((_finalist(trial, c, p, levels[trial], test) for (trial, c), p in zip(comparisons.items(), adjusted)),
                    key=lambda f: -f.comparison.mean_difference)
    winners = [f for f in ranked if f.adjusted_p <= alpha and f.comparison.mean_difference > 0]
    return Verdict(tuple(ranked), winners[0] if winners else None, test)


def holm_levels(p_values: Mapping[int, float], alpha: float) -> dict[int, float]:
    """Each test's level in Holm's step-down: alpha / (tests not yet rejected) when its turn comes, smallest p
    first; once one is not rejected the procedure stops, and every test from it on keeps that last level. So a
    bound at its level is above 0 exactly when Holm rejects its test (a later test's own smaller p-value
    cannot pass a level that the step-down never reached)."""
    order = sorted(p_values, key=lambda trial: p_values[trial])
    levels, stopped = {}, None
    for rank, trial in enumerate(order):
        if stopped is None and min(1.0, (len(order) - rank) * p_values[trial]) > alpha:
            stopped = alpha / (len(order) - rank)
        levels[trial] = stopped if stopped is not None else alpha / (len(order) - rank)
    return levels


def _finalist(trial: int, comparison: Comparison, adjusted_p: float, level: float, test: str) -> Finalist:
    return Finalist(trial, comparison, adjusted_p, level, lower_bound(np.array(comparison.differences), level, test))


def outward(value: float, *, down: bool) -> str:
    """`value` to three decimals with its sign, rounded away from what it bounds (down for a lower bound)."""
    if math.isinf(value):
        return "none (too few seeds for the level)"
    rounded = (math.floor if down else math.ceil)(round(value * 1000, 9)) / 1000
    return f"{rounded:+.3f}".replace("-0.000", "+0.000")


def _p(p_value: float) -> str:
    return "p < 0.001" if p_value < 0.0005 else f"p = {p_value:.3f}"
