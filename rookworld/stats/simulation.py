"""Simulated staged sweeps: how often the verdict names a false winner, and how often it finds a true one.

A staged sweep (rookworld/sweep/staged/stages.py) in a model of its scores: every configuration's score on a seed is
its true mean plus a training-seed term and a position term (the configuration's fit to the block of positions that
scored the run), independent between configurations. On a paired difference the seed term has standard deviation
`seed_sd` and the position term `position_sd` (the measured regime: 0.003 and 0.001 at the run's evaluated
positions; docs/sweeps.md, Positions). A share `game_share` of the position term's variance is game-level: each
configuration has its own fit to each game of a part (its positions move together), and a block's game term is
the position-weighted mean over the games it covers; the rest is drawn per block. `game_share` is stated at a
block cut across the games (draw "positions"), where it was measured; cut by whole games, a block covers ~12
games instead of most of the part, so the same per-game fit weighs more in one block but is independent between
blocks. The parts' game structure is `validation` and `test` (games x positions per game, file order by game),
cut as the run cuts them (rookworld/stats/blocks.py), `block` positions a block; seed s is scored on block
s modulo the blocks, the confirmation's seeds following the race's:

    draw "first"      every seed of a part on its first `block` positions (eval.draw=first)
    draw "positions"  seed s on block s of one shuffle of the positions, games ignored (the draw before games)
    draw "games"      seed s on block s of whole games (eval.draw=blocks)

The sweep: `configs` sampled configurations and the baseline on the search seeds (validation), the `race_top`
best search means and the baseline on the race seeds (the search's among them), the best race mean (the
baseline aside) against the baseline on fresh seeds on the confirmation's pool, one-sided signed-rank test at
`alpha` (rookworld.stats.paired's: the same decision as one_sided_p <= alpha). A winner is named when the
test rejects and the mean difference is positive. The race's drops are left out: they only remove
configurations, and the confirmation alone names the winner.

Vectorised over sweeps (numpy, in chunks): 10,000 sweeps of 50 configurations take a few seconds.

    python -m rookworld.sweep simulate     # the figures of docs/sweeps.md, Positions
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from rookworld.stats.blocks import game_blocks
from rookworld.stats.paired import signed_rank_critical_value, signed_rank_statistic

DRAWS = ("first", "positions", "games")
CHUNK = 5000  # sweeps simulated at once (bounds the memory)


@dataclass(frozen=True)
class Part:
    """A held-out part's game structure: `games` games of `positions` positions each, in file order by game."""
    games: int
    positions: int

    def game_of_each_position(self) -> np.ndarray:
        return np.repeat(np.arange(self.games), self.positions)


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
    draw: str  # one of DRAWS
    game_share: float = 0.0  # of the position term's variance at a position-cut block: game-level
    validation: Part = Part(186, 80)  # the self-play pools: 14,908 and 16,554 positions
    test: Part = Part(195, 85)
    block: int = 1000  # positions a block (eval.num_policy)


MEASURED = Regime(configs=50, search_seeds=3, race_seeds=10, race_top=4, confirm_seeds=10, seed_sd=0.003,
                  position_sd=0.001, alpha=0.01, draw="games")


def block_weights(part: Part, draw: str, size: int) -> np.ndarray:
    """[blocks, games]: the share of each block's positions that each game holds, under `draw`."""
    if draw not in DRAWS:
        raise ValueError(f"draw={draw!r}: expected one of {', '.join(DRAWS)}")
    games = part.game_of_each_position()
    if draw == "first":
        blocks = [list(range(size))]
    else:
        blocks = game_blocks([None] * len(games) if draw == "positions" else games.tolist(), size)
    weights = np.zeros((len(blocks), part.games))
    for number, block in enumerate(blocks):
        np.add.at(weights[number], games[block], 1 / size)
    return weights


@lru_cache(maxsize=32)
def _block_factor(regime: Regime, part: Part) -> np.ndarray:
    """F with F F^T the covariance of a paired difference's position terms over the part's blocks: the game terms
    (the per-game variance set so that a position-cut block's game term has `game_share` of position_sd^2)
    plus the block's own term."""
    weights = block_weights(part, regime.draw, regime.block)
    cut_across = block_weights(part, "positions", regime.block)
    game_variance = regime.game_share * regime.position_sd ** 2 / float(np.mean((cut_across ** 2).sum(axis=1)))
    covariance = game_variance * weights @ weights.T + (1 - regime.game_share) * regime.position_sd ** 2 * np.eye(len(weights))
    values, vectors = np.linalg.eigh(covariance)
    return vectors * np.sqrt(np.clip(values, 0, None))


def _scores(rng: np.random.Generator, regime: Regime, part: Part, sweeps: int, configs: int,
            seeds: np.ndarray) -> np.ndarray:
    """Noise of each (sweep, configuration, seed) score on `part`: seed term plus the position term of the seed's
    block, each configuration's own (sd / sqrt 2, so that a paired difference has the regime's)."""
    seed = rng.standard_normal((sweeps, configs, len(seeds))) * regime.seed_sd / np.sqrt(2)
    factor = _block_factor(regime, part)
    blocks = rng.standard_normal((sweeps, configs, factor.shape[1])) @ factor.T / np.sqrt(2)
    return seed + blocks[:, :, seeds % len(factor)]


def winners(regime: Regime, true_gain: np.ndarray, sweeps: int, seed: int) -> np.ndarray:
    """Per sweep, the configuration the verdict names (index into true_gain), or -1 for none. `true_gain`:
    each sampled configuration's true mean minus the baseline's (the baseline is index `configs`)."""
    rng = np.random.default_rng(seed)
    return np.concatenate([_winners(rng, regime, true_gain, min(CHUNK, sweeps - start))
                           for start in range(0, sweeps, CHUNK)])


def _winners(rng: np.random.Generator, regime: Regime, true_gain: np.ndarray, sweeps: int) -> np.ndarray:
    n = regime.configs
    means = np.append(true_gain, 0.0)[None, :, None]
    race_seeds = np.arange(regime.race_seeds)
    validation = means + _scores(rng, regime, regime.validation, sweeps, n + 1, race_seeds)
    search = validation[:, :n, :regime.search_seeds].mean(axis=2)
    top = np.argsort(-search, axis=1)[:, :regime.race_top]
    race = np.take_along_axis(validation[:, :n].mean(axis=2), top, axis=1)
    finalist = np.take_along_axis(top, race.argmax(axis=1)[:, None], axis=1)[:, 0]
    confirm_seeds = regime.race_seeds + np.arange(regime.confirm_seeds)
    test = means + _scores(rng, regime, regime.test, sweeps, n + 1, confirm_seeds)
    differences = test[np.arange(sweeps), finalist] - test[:, n]
    found = signed_rank_rejects(differences, regime.alpha) & (differences.mean(axis=1) > 0)
    return np.where(found, finalist, -1)


def signed_rank_rejects(differences: np.ndarray, alpha: float) -> np.ndarray:
    """Per row: the one-sided exact signed-rank test rejects at alpha (W+ reaches its critical value)."""
    return signed_rank_statistic(differences) >= signed_rank_critical_value(differences.shape[1], alpha)


def false_winner_rate(regime: Regime, sweeps: int = 1000, seed: int = 0) -> float:
    """The share of null sweeps (every configuration equal to the baseline) whose verdict names a winner."""
    return float(np.mean(winners(regime, np.zeros(regime.configs), sweeps, seed) >= 0))


def false_winners(regime: Regime, sweeps: int, seed: int = 0) -> tuple[float, float, float]:
    """The false-winner rate of `sweeps` null sweeps and its exact (Clopper-Pearson) 95% binomial interval."""
    from scipy import stats  # on first use

    named = int(np.sum(winners(regime, np.zeros(regime.configs), sweeps, seed) >= 0))
    interval = stats.binomtest(named, sweeps).proportion_ci(0.95, method="exact")
    return named / sweeps, float(interval.low), float(interval.high)


def power(regime: Regime, gain: float, sweeps: int = 1000, seed: int = 0) -> float:
    """The share of sweeps in which one configuration better by `gain` (the others equal to the baseline)
    is named the winner."""
    true_gain = np.zeros(regime.configs)
    true_gain[0] = gain
    return float(np.mean(winners(regime, true_gain, sweeps, seed) == 0))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sweeps", type=int, default=100_000, help="null sweeps per regime (default %(default)s)")


def run(args: argparse.Namespace) -> int:
    """The false-winner rate and the power of the measured regime, per game share and draw."""
    sweeps = args.sweeps
    for share in (0.0, 0.5, 1.0):
        for draw in DRAWS:
            regime = replace(MEASURED, draw=draw, game_share=share)
            rate, low, high = false_winners(regime, sweeps)
            print(f"game share {share:.1f}, draw {draw}: false winners {rate:.2%} ({low:.2%}-{high:.2%}) of "
                  f"{sweeps:,} null sweeps; power for +0.01 {power(regime, 0.01, 10_000):.1%}, "
                  f"for +0.005 {power(regime, 0.005, 10_000):.1%}")
    return 0
