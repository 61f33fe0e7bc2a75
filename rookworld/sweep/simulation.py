"""Simulated staged sweeps: how often the verdict names a false winner, and how often it finds a true one.

A staged sweep (rookworld/sweep/staged/stages.py) in a model of its scores: every configuration's score on a seed is
its true mean plus a training-seed term and a position term (the configuration's fit to the positions that
scored the run), independent between configurations. On a paired difference the seed term has standard
deviation `seed_sd` and the position term `position_sd` (the measured regime: 0.003 and 0.001 at the run's
evaluated positions; docs/sweeps.md, Positions). Where every run of a part is scored on the same positions
(`shared_positions`, eval.draw=first) a configuration's position term is the same on every seed of that part;
where each seed draws its own block (eval.draw=blocks) it is drawn afresh per seed.

The sweep: `configs` sampled configurations and the baseline on the search seeds (validation), the `race_top`
best search means and the baseline on the race seeds (the search's among them), the best race mean (the
baseline aside) against the baseline on fresh seeds on the test positions, one-sided signed-rank test at
`alpha` (the exact test's critical value: the same decision as rookworld.sweep.staged.paired.one_sided_p <= alpha on
differences without ties). A winner is named when the test rejects and the mean difference is positive. The
race's drops are left out: they only remove configurations, and the confirmation alone names the winner.

Vectorised over sweeps (numpy): 1,000 sweeps of 50 configurations take well under a second.

    python -m rookworld.sweep.simulation     # the figures of docs/lab/evaluation-noise.md, Simulated sweeps
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from rookworld.sweep.staged.paired import signed_rank_critical_value


@dataclass(frozen=True)
class Regime:
    """The model's numbers (standard deviations are of a paired difference)."""

    configs: int  # sampled configurations, the baseline besides
    search_seeds: int
    race_seeds: int  # the search's among them
    race_top: int
    confirm_seeds: int
    seed_sd: float
    position_sd: float
    alpha: float
    shared_positions: bool  # every run of a part on the same positions (eval.draw=first)


MEASURED = Regime(configs=50, search_seeds=3, race_seeds=10, race_top=4, confirm_seeds=10, seed_sd=0.003,
                  position_sd=0.001, alpha=0.01, shared_positions=False)


def _scores(rng: np.random.Generator, regime: Regime, sweeps: int, configs: int, seeds: int) -> np.ndarray:
    """Noise of each (sweep, configuration, seed) score of one part: seed term plus position term, each
    configuration's own (sd / sqrt 2, so that a paired difference has the regime's sd)."""
    seed = rng.standard_normal((sweeps, configs, seeds)) * regime.seed_sd / np.sqrt(2)
    shape = (sweeps, configs, 1) if regime.shared_positions else (sweeps, configs, seeds)
    return seed + rng.standard_normal(shape) * regime.position_sd / np.sqrt(2)


def winners(regime: Regime, true_gain: np.ndarray, sweeps: int, seed: int) -> np.ndarray:
    """Per sweep, the configuration the verdict names (index into true_gain), or -1 for none. `true_gain`:
    each sampled configuration's true mean minus the baseline's (the baseline is index `configs`)."""
    rng = np.random.default_rng(seed)
    n = regime.configs
    means = np.append(true_gain, 0.0)[None, :, None]
    validation = means + _scores(rng, regime, sweeps, n + 1, regime.race_seeds)
    search = validation[:, :n, :regime.search_seeds].mean(axis=2)
    top = np.argsort(-search, axis=1)[:, :regime.race_top]
    race = np.take_along_axis(validation[:, :n].mean(axis=2), top, axis=1)
    finalist = np.take_along_axis(top, race.argmax(axis=1)[:, None], axis=1)[:, 0]
    test = means + _scores(rng, regime, sweeps, n + 1, regime.confirm_seeds)
    differences = test[np.arange(sweeps), finalist] - test[:, n]
    found = signed_rank_rejects(differences, regime.alpha) & (differences.mean(axis=1) > 0)
    return np.where(found, finalist, -1)


def signed_rank_rejects(differences: np.ndarray, alpha: float) -> np.ndarray:
    """Per row: the one-sided exact signed-rank test rejects at alpha (W+ reaches its critical value)."""
    ranks = np.argsort(np.argsort(np.abs(differences), axis=1), axis=1) + 1
    positive = np.where(differences > 0, ranks, 0).sum(axis=1)
    return positive >= signed_rank_critical_value(differences.shape[1], alpha)


def false_winner_rate(regime: Regime, sweeps: int = 1000, seed: int = 0) -> float:
    """The share of null sweeps (every configuration equal to the baseline) whose verdict names a winner."""
    return float(np.mean(winners(regime, np.zeros(regime.configs), sweeps, seed) >= 0))


def power(regime: Regime, gain: float, sweeps: int = 1000, seed: int = 0) -> float:
    """The share of sweeps in which one configuration better by `gain` (the others equal to the baseline)
    is named the winner."""
    true_gain = np.zeros(regime.configs)
    true_gain[0] = gain
    return float(np.mean(winners(regime, true_gain, sweeps, seed) == 0))


def main() -> None:
    for shared in (True, False):
        regime = replace(MEASURED, shared_positions=shared)
        design = "one position set per part (eval.draw=first)" if shared else "each seed its own block (eval.draw=blocks)"
        print(f"{design}: false winners {false_winner_rate(regime):.1%} of 1,000 null sweeps, "
              f"power for +0.01 {power(regime, 0.01):.1%}, for +0.005 {power(regime, 0.005):.1%}")


if __name__ == "__main__":
    main()
