"""Simulated per-seed objectives for the statistics tests of racing and the verdict.

A configuration's score on seed s is its true mean, plus an effect of seed s that every configuration
shares (the seed's problem order and sampling stream), plus the configuration's own noise on that
seed. Both are normal with sd 0.01, a round figure above the seed spread docs/lab/recipe.md reports for
rookworld_tiny at 400 steps (the hand-tuned recipe's three seeds 0.620, 0.607, 0.608: sd 0.007).
Pairing by seed removes the shared effect; the paired differences keep sd 0.01 * sqrt(2) = 0.014.
"""
from __future__ import annotations

import numpy as np

NOISE_SD = 0.01
SEED_EFFECT_SD = 0.01


class SimulatedSeeds:
    """Each (configuration, seed) has one score, the same whenever it is asked for."""

    def __init__(self, true_means: dict, rng_seed: int):
        self.true_means = true_means
        self.rng_seed = rng_seed

    def score(self, config, seed: int) -> float:
        seed_effect = np.random.default_rng([self.rng_seed, seed]).normal(0, SEED_EFFECT_SD)
        own = np.random.default_rng([self.rng_seed, seed, list(self.true_means).index(config) + 1]).normal(0, NOISE_SD)
        return float(self.true_means[config] + seed_effect + own)

    def scores(self, config, seeds) -> dict[int, float]:
        return {seed: self.score(config, seed) for seed in seeds}
