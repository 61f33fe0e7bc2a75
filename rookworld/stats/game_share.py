"""How much of the position term is game-level: measured on a chess sweep's own per-position scores.

A paired difference's position term is the two configurations' different fit to the positions of the seed's
block. Positions of one game move together, so the term has a game part and a position part. On the per-position
differences d_i of two configurations on one seed's block (the same positions, scored in the same run order),
with g(i) the game of position i, the one-way random-effects model d_i = mu + gamma_g(i) + e_i gives, by the
ANOVA estimator pooled over blocks (each block its own mu):

    within  = sigma_e^2 = SS_within / (N - k)                   (per position)
    between = sigma_gamma^2 = max(0, (MS_between - within) / n0)   (per game), n0 = sum_b (N_b - sum_j n_bj^2 / N_b) / sum_b (k_b - 1)

and at a block with game weights w_j (the share of its positions each game holds) the game-level share of the
block term's variance is between x sum w_j^2 / (between x sum w_j^2 + within / N). The simulation's `game_share`
(rookworld/stats/simulation.py) is this share at a block cut across the games (w_j = about the games' shares of the part: a block holds most of its games).

On a sweep (rookworld/sweep/staged/stages.py): each run records its per-problem scores at the full horizon in its
draw's order (PROBLEMS_ATTR, P: problems first), and with eval.draw=blocks a seed's block is cut again from the
part's games (stages.confirmation_blocks) to name each position's game. Only P: positions have games. On the first
chess sweep: game_variance(confirmation_blocks(study.get_trials(), finalist, [p.game for p in final P:], 1000)).
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GameVariance:
    blocks: int
    positions: int
    games: int
    between: float  # per game: the variance of a game's shift of the per-position differences
    within: float   # per position: the variance about its game's shift

    def share_at(self, weights: Sequence[float], size: int) -> float:
        """The game-level share of the variance of a block's mean difference: `size` positions whose games hold
        the shares `weights` of them."""
        game = self.between * float(np.sum(np.square(weights)))
        total = game + self.within / size
        return game / total if total > 0 else 0.0


def game_variance(blocks: Iterable[tuple[Sequence[float], Sequence[Hashable]]]) -> GameVariance:
    """The pooled ANOVA estimate over `blocks`: each a seed's per-position differences and each position's game."""
    ss_within = ss_between = df_within = df_between = n0_sum = 0.0
    count = positions = games = 0
    for differences, game_of in blocks:
        d = np.asarray(differences, dtype=float)
        labels = np.unique(np.asarray(game_of), return_inverse=True)[1]
        sizes = np.bincount(labels)
        means = np.bincount(labels, weights=d) / sizes
        ss_within += float(((d - means[labels]) ** 2).sum())
        ss_between += float((sizes * (means - d.mean()) ** 2).sum())
        df_within += len(d) - len(sizes)
        df_between += len(sizes) - 1
        n0_sum += len(d) - float((sizes ** 2).sum()) / len(d)
        count, positions, games = count + 1, positions + len(d), games + len(sizes)
    if df_within <= 0 or df_between <= 0:
        raise ValueError("the game variance needs a block with two games and a game with two positions")
    within = ss_within / df_within
    between = max(0.0, (ss_between / df_between - within) / (n0_sum / df_between))
    return GameVariance(count, positions, games, between, within)
