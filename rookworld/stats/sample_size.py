"""How many paired seeds a difference needs: the power of the one-sided paired tests.

Both on normally distributed paired differences. Paired t-test: exact, from the noncentral t
distribution. Wilcoxon signed-rank: the share of simulated seed sets (seeded, so deterministic) whose
signed-rank statistic reaches the exact test's critical value; at the few seeds a race or a
confirmation uses, the test's discreteness matters (on 5 seeds only "all five better" reaches
p <= 0.05), which a large-sample formula would miss.
`sd` is the standard deviation of the paired differences, not of one configuration's scores: with
pairing that removes nothing it is sqrt(2) times the latter.
"""

from __future__ import annotations

from collections.abc import Sequence
import math

import numpy as np

from rookworld.stats.paired import check_test, fewest_seeds_to_decide, signed_rank_critical_value

MAX_SEEDS = 1000  # beyond this a difference is not worth racing for
SIMULATIONS = 20_000  # seed sets per Wilcoxon power: its standard error is at most 0.0035
SIMULATION_SEED = 0
_CHUNK = 2000  # simulated seed sets ranked at once (bounds the memory)


def paired_power(seeds: int, difference: float, sd: float, *, alpha: float, test: str) -> float:
    """The chance that the one-sided test at alpha finds a true mean difference `difference` > 0
    with `seeds` paired seeds whose differences have standard deviation `sd`."""
    check_test(test)
    if seeds < fewest_seeds_to_decide(alpha, test):
        return 0.0
    if test == "wilcoxon":
        return _wilcoxon_power(seeds, difference / sd, alpha)
    from scipy import stats  # on first use: ~1 s that every run importing this module would pay
    df = seeds - 1
    return float(stats.nct.sf(stats.t.ppf(1 - alpha, df), df, difference / sd * math.sqrt(seeds)))


def _wilcoxon_power(seeds: int, effect: float, alpha: float) -> float:
    critical = signed_rank_critical_value(seeds, alpha)
    rng = np.random.default_rng([SIMULATION_SEED, seeds])
    reached = 0
    for start in range(0, SIMULATIONS, _CHUNK):
        differences = rng.standard_normal((min(_CHUNK, SIMULATIONS - start), seeds)) + effect
        ranks = np.argsort(np.argsort(np.abs(differences), axis=1), axis=1) + 1
        reached += int(np.count_nonzero(np.where(differences > 0, ranks, 0).sum(axis=1) >= critical))
    return reached / SIMULATIONS


def seeds_needed(difference: float, sd: float, *, alpha: float, power: float, test: str) -> int:
    """The fewest paired seeds with which the test finds `difference` with at least `power`."""
    if difference <= 0 or sd <= 0:
        raise ValueError(f"difference and sd must be positive, got {difference} and {sd}")
    def enough(seeds: int) -> bool:
        return paired_power(seeds, difference, sd, alpha=alpha, test=test) >= power

    low = fewest_seeds_to_decide(alpha, test)  # power rises with the seeds: double, then bisect
    if enough(low):
        return low
    high = low * 2
    while not enough(high):
        low, high = high, high * 2
        if high > MAX_SEEDS:
            raise ValueError(f"a difference of {difference} at sd {sd} needs more than {MAX_SEEDS} seeds")
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


def power_table(differences: Sequence[float], sds: Sequence[float], *, alpha: float, power: float,
                test: str) -> str:
    """A markdown table: paired seeds needed, one row per difference, one column per sd."""
    lines = ["| difference | " + " | ".join(f"sd {sd:g}" for sd in sds) + " |",
             "|---|" + "---|" * len(sds)]
    for difference in differences:
        cells = (str(seeds_needed(difference, sd, alpha=alpha, power=power, test=test)) for sd in sds)
        lines.append(f"| {difference:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def detectable_difference(seeds: int, sd: float, *, alpha: float, power: float, test: str) -> float:
    """The smallest true difference the one-sided test at alpha finds with at least `power` on `seeds` paired
    seeds whose differences have standard deviation `sd` (inf when the seeds cannot reach alpha)."""
    if seeds < fewest_seeds_to_decide(alpha, test):
        return math.inf
    if sd <= 0:
        return 0.0  # differences that never vary: any true difference shows on every seed
    low, high = 0.0, sd
    while paired_power(seeds, high, sd, alpha=alpha, test=test) < power:  # power rises with the difference
        low, high = high, high * 2
    while high - low > sd * 1e-3:
        middle = (low + high) / 2
        low, high = (low, middle) if paired_power(seeds, middle, sd, alpha=alpha, test=test) >= power else (middle, high)
    return high
