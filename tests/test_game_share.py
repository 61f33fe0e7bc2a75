"""The game-level share of the position term (rookworld/stats/game_share.py), estimated from per-position
paired differences with known variance components, and the simulation's game_share read back from them."""
from __future__ import annotations

import numpy as np
import pytest

from rookworld.stats.simulation import Part, block_weights
from rookworld.stats.game_share import game_variance


@pytest.mark.parametrize("share", [0.0, 0.5, 0.9])
def test_the_estimate_recovers_the_planted_game_share_at_a_block_cut_across_the_games(share: float) -> None:
    """Blocks of whole games (12 games of 80 positions, 10 seeds' blocks) carry the model's differences; the
    estimated share at a 1,000-position block cut across the 195 test games is within 0.1 of the planted one."""
    part, size = Part(195, 85), 1000
    across = block_weights(part, "positions", size)[0]
    within = 0.05 ** 2  # a per-position difference's own variance
    between = share / (1 - share) * within / size / float(np.sum(across ** 2))  # the planted share at `across`
    rng = np.random.default_rng(3)
    blocks = []
    for _ in range(10):
        games = np.repeat(np.arange(12), 80)
        shifts = rng.normal(0, np.sqrt(between), 12)
        blocks.append((0.01 + shifts[games] + rng.normal(0, np.sqrt(within), len(games)), games))
    estimate = game_variance(blocks)
    assert (estimate.blocks, estimate.positions, estimate.games) == (10, 9600, 120)
    assert estimate.within == pytest.approx(within, rel=0.05)
    assert estimate.share_at(across, size) == pytest.approx(share, abs=0.1)


def test_one_game_per_block_cannot_be_split() -> None:
    with pytest.raises(ValueError, match="two games"):
        game_variance([([0.1, 0.2, 0.3], [7, 7, 7])])


def test_a_confirmations_per_position_scores_pair_up_by_seed_with_their_blocks_games() -> None:
    """Two confirmation runs a seed in a real Optuna study (the finalist's and the baseline's per-problem scores,
    P: block first): the pairs are finalist minus baseline on the seed's block, with the games of that block."""
    import optuna

    from rookworld.stats.blocks import game_blocks
    from rookworld.sweep.staged.stages import confirmation_blocks
    from rookworld.sweep.staged.stages import BASELINE, PROBLEMS_ATTR, Item

    part_games = [game for game in range(30) for _ in range(10)]  # 30 games of 10 positions
    study = optuna.create_study(direction="maximize")
    for config, offset in (("4", 0.1), (BASELINE, 0.0)):
        for seed in (10, 11):
            study.enqueue_trial({}, user_attrs=Item("confirm", config, (), (seed,)).attrs())
            trial = study.ask()
            trial.set_user_attr(PROBLEMS_ATTR, {str(seed): [offset + 0.01 * i for i in range(50)] + [0.5] * 50})
            study.tell(trial, 0.5)
    pairs = confirmation_blocks(study.get_trials(), "4", part_games, 50)
    blocks = game_blocks(part_games, 50)
    assert [len(d) for d, _ in pairs] == [50, 50] and all(d == pytest.approx([0.1] * 50) for d, _ in pairs)
    assert [games for _, games in pairs] == [[part_games[i] for i in blocks[s % len(blocks)]] for s in (10, 11)]
    assert all(len(set(games)) == 5 for _, games in pairs)  # five whole games of ten positions a block
