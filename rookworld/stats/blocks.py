"""The held-out blocks of eval.draw=blocks: each part cut into blocks of whole games, the same for every run.

Seed s evaluates block s, so two seeds' scores share no position; cut by whole games, they share no game
either, so the part of a configuration's fit that is a game's (its positions move together) is drawn afresh
per seed instead of repeating across the seeds of a paired test (a block of 1,000 positions cut across the
games would cover most of a part's ~190 games, and two such blocks' game terms would correlate).
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

DRAW_SHUFFLE_SEED = 0  # one shuffle of each part for every run: the blocks of two seeds never overlap


def game_blocks(games: Sequence[Hashable | None], size: int) -> list[list[int]]:
    """The blocks of `size` problems of a part (indices into `games`, each problem's game index, None where
    unknown), no game in two blocks: the games in a seeded shuffle (a problem without a game is a game of its
    own), taken whole until a block holds at least `size` problems, then `size` of those drawn at random
    (seeded; the rest unused); blocks while the part lasts. Without game indices: consecutive slices of one
    seeded shuffle of the problems."""
    units: dict = {}
    for index, game in enumerate(games):
        units.setdefault(("row", index) if game is None else ("game", game), []).append(index)
    grouped = list(units.values())
    order = np.random.default_rng([DRAW_SHUFFLE_SEED, len(games)]).permutation(len(grouped))
    blocks, block = [], []
    for unit in order:
        block += grouped[unit]
        if len(block) >= size:
            blocks.append(block if len(block) == size else _subset(block, size, len(blocks), len(games)))
            block = []
    return blocks


def _subset(block: list[int], size: int, number: int, part: int) -> list[int]:
    """`size` of the block's problems drawn at random (seeded by the block's number and the part's size), in
    the block's order."""
    chosen = np.random.default_rng([DRAW_SHUFFLE_SEED, part, number]).choice(len(block), size, replace=False)
    return [block[i] for i in sorted(chosen)]
