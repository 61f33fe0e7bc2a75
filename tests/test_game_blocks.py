"""eval.draw=blocks cuts each held-out part by whole games (rookworld/stats/blocks.py): on the shipped
self-play pools no game is in two blocks of one part, every block has the draw's size, a seed's block is the
same in every run, and a part without game indices keeps its blocks of one shuffle."""
from __future__ import annotations

import pytest

from rookworld.run.build import draw_block
from rookworld.app.config import DATA_DIR
from rookworld.stats.blocks import game_blocks
from rookworld.data.positions import load_policy_problems

SELFPLAY = "selfplay/{split}.jsonl.xz"  # under rookworld/data/


@pytest.mark.parametrize("split, games, blocks", [("validation", 186, 14), ("test", 195, 15)])
@pytest.mark.slow
def test_no_game_is_in_two_blocks_of_one_part(split: str, games: int, blocks: int) -> None:
    problems = load_policy_problems(split, DATA_DIR / SELFPLAY.format(split=split))
    assert len({p.game for p in problems}) == games and None not in {p.game for p in problems}
    cut = game_blocks([p.game for p in problems], 1000)
    assert len(cut) == blocks and all(len(block) == 1000 for block in cut)
    block_games = [{problems[i].game for i in block} for block in cut]
    for number, these in enumerate(block_games):
        assert all(not these & other for other in block_games[number + 1:])  # disjoint in games, so in positions
    assert max(map(len, block_games)) < 20  # ~12 whole games a block (a position-cut block covered ~178 of 195)
    assert draw_block(problems, 1000, blocks + 2, "policy") == [problems[i] for i in cut[2]]  # seeds wrap round


def test_a_part_without_game_indices_is_cut_into_slices_of_one_shuffle() -> None:
    problems = load_policy_problems("test")  # the bundled part: no game indices
    assert {p.game for p in problems} == {None}
    cut = game_blocks([p.game for p in problems], 150)
    assert len(cut) == len(problems) // 150
    flat = [i for block in cut for i in block]
    assert len(set(flat)) == len(flat) and cut[0] != list(range(150))
