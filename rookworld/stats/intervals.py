"""95% intervals: of a mean over seeds (Student's t), of one seed's score from its evaluation's standard error,
and of Spearman's rank correlation (Fisher's z); a stage report never calls a configuration best, nor a rung
faithful, without one."""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CONFIDENCE = 0.95
Z_95 = 1.959964  # the normal quantile of a two-sided 95% interval


@dataclass(frozen=True)
class Estimate:
    """A configuration's mean over its seeds and the 95% t-interval (nan with one seed)."""

    mean: float
    low: float
    high: float
    seeds: int

    @classmethod
    def of(cls, scores: Mapping[int, float]) -> Estimate:
        values = list(scores.values())
        mean = statistics.fmean(values)
        if len(values) < 2:
            return cls(mean, math.nan, math.nan, len(values))
        from scipy import stats  # on first use: ~1 s that every sweep launch would pay
        half = stats.t.ppf(0.5 + CONFIDENCE / 2, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
        return cls(mean, mean - half, mean + half, len(values))

    def text(self) -> str:
        if math.isnan(self.low):
            return f"{self.mean:.4f} (1 seed, no interval)"
        return f"{self.mean:.4f} (95% CI {self.low:.4f}..{self.high:.4f}, {self.seeds} seeds)"


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rho; nan with fewer than 3 points or a side that does not vary (no ranking to compare)."""
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return math.nan
    from scipy import stats  # on first use: ~1 s that every sweep launch would pay
    return float(stats.spearmanr(xs, ys).statistic)


def rho_text(rho: float, n: int) -> str:
    """Spearman's rho over n configurations with its 95% interval (Fisher's z, Fieller's variance 1.06 / (n - 3));
    never without one."""
    if math.isnan(rho) or n < 4:
        return "n/a (fewer than 4 configurations, or tied scores: no interval)"
    from scipy import stats  # on first use: ~1 s that every sweep launch would pay
    half = stats.norm.ppf(0.5 + CONFIDENCE / 2) * math.sqrt(1.06 / (n - 3))
    z = math.atanh(max(min(rho, 0.999), -0.999))  # a rank correlation of exactly +-1 is clipped (its z is infinite)
    return f"{rho:+.2f} (95% CI {math.tanh(z - half):+.2f}..{math.tanh(z + half):+.2f}, {n} configurations)"


def evaluation_interval(objective: float | None, se: float | None) -> dict[str, Any]:
    """The 95% interval of one seed's objective from its evaluation's standard error (the seed spread not included)."""
    if objective is None or se is None or math.isnan(se):
        return {}
    return {"interval": (objective - Z_95 * se, objective + Z_95 * se),
            "interval_basis": "one seed: evaluation noise only, not the seed spread"}
