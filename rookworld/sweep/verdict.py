"""The verdict: do the finalists beat the baseline on fresh seeds?

Each finalist runs with the baseline on seeds that no earlier stage used, scored on the test
positions. Each is compared with the baseline (rookworld.sweep.paired: one-sided paired test, 95%
bootstrap interval of the mean paired difference); with several finalists, Holm's correction keeps
the chance of naming any false winner at most alpha. The winner is the finalist with the largest
mean difference among those whose adjusted p <= alpha. The verdict is one line:

    verdict: trial 162 beats the baseline by +0.021 (95% CI +0.012..+0.030, p = 0.002, 10 seeds)
    verdict: no configuration beats the baseline (best +0.004, 95% CI -0.006..+0.013)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rookworld.sweep.paired import Comparison, Scores, compare, holm


@dataclass(frozen=True)
class Finalist:
    trial: int
    comparison: Comparison  # against the baseline; its p_value is the unadjusted one
    adjusted_p: float  # Holm over every finalist of the confirmation


@dataclass(frozen=True)
class Verdict:
    finalists: tuple[Finalist, ...]  # largest mean difference first
    winner: Finalist | None

    def line(self) -> str:
        if self.winner is not None:
            c = self.winner.comparison
            return (f"verdict: trial {self.winner.trial} beats the baseline by {_signed(c.mean_difference)} "
                    f"(95% CI {_signed(c.low)}..{_signed(c.high)}, {_p(self.winner.adjusted_p)}, {c.seeds} seeds)")
        c = self.finalists[0].comparison
        return (f"verdict: no configuration beats the baseline (best {_signed(c.mean_difference)}, "
                f"95% CI {_signed(c.low)}..{_signed(c.high)})")


def confirm(finalists: Mapping[int, Scores], baseline: Scores, *, alpha: float, test: str) -> Verdict:
    """The verdict on the finalists' and the baseline's fresh-seed scores (trial number -> seed ->
    score; higher is better)."""
    if not finalists:
        raise ValueError("a confirmation needs at least one finalist")
    comparisons = {trial: compare(scores, baseline, test=test) for trial, scores in finalists.items()}
    adjusted = holm([c.p_value for c in comparisons.values()])
    ranked = sorted((Finalist(trial, c, p) for (trial, c), p in zip(comparisons.items(), adjusted)),
                    key=lambda f: -f.comparison.mean_difference)
    winners = [f for f in ranked if f.adjusted_p <= alpha and f.comparison.mean_difference > 0]
    return Verdict(tuple(ranked), winners[0] if winners else None)


def _signed(value: float) -> str:
    text = f"{value:+.3f}"
    return "+0.000" if text == "-0.000" else text


def _p(p_value: float) -> str:
    return "p < 0.001" if p_value < 0.0005 else f"p = {p_value:.3f}"
