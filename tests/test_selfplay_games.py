"""rookworld.data.selfplay: a game is fixed by (seed, game); the draw check of the game loop."""
from __future__ import annotations

import os
import random
from pathlib import Path

import chess
import pytest

from rookworld.data.move_cases import random_endgame_board
from rookworld.data.records import read_jsonl
from rookworld.data.selfplay import GameSettings, Repetitions, is_over_or_drawn, play_game
from rookworld.stockfish.uci_pipe import PipeEngine

STOCKFISH = "/usr/games/stockfish"
# games 0, 14, 17 and 21 of seed 2026 at 10,000 nodes, as python-chess's analyse labelled them
FIXTURE = Path(__file__).parent / "fixtures" / "selfplay_seed2026_games.jsonl.gz"


@pytest.mark.skipif(not os.access(STOCKFISH, os.X_OK), reason="needs Stockfish")
def test_the_games_of_seed_2026_are_labelled_as_before() -> None:
    expected = read_jsonl(FIXTURE)
    with PipeEngine(STOCKFISH, nodes=10_000) as engine:
        played = [row for game in (0, 14, 17, 21) for row in play_game(engine, 2026, game, GameSettings())]
    assert len(played) == len(expected) == 86
    assert played == expected


def test_the_cheaper_draw_check_equals_python_chess_claim_draw() -> None:
    rng, claims = random.Random(0), 0
    for game in range(40):  # few-piece random games repeat positions often
        board = random_endgame_board(rng) if game % 2 else chess.Board()
        repetitions = Repetitions()
        for _ in range(60):
            repetitions.add(board.fen())
            over = board.is_game_over(claim_draw=True)
            assert is_over_or_drawn(board, repetitions.any) == over, board.fen()
            claims += over and not board.is_game_over()
            if over:
                break
            board.push(rng.choice(list(board.legal_moves)))
    assert claims >= 3  # threefold (or fifty-move) claims were among the positions checked


@pytest.mark.skipif(not os.access(STOCKFISH, os.X_OK), reason="needs Stockfish")
def test_the_speed_bench_measures_two_trees_and_checks_their_labels(capsys: pytest.CaptureFixture) -> None:
    from rookworld.bench.selfplay_speed import THIS_TREE, main
    main(["--before", str(THIS_TREE), "--measure", "loop", "--games", "2", "--repeats", "1", "--nodes", "300"])
    out = capsys.readouterr().out
    assert out.count("repeat 0") == 2 and "python_ms" in out and "engine_ms" in out
    assert "labels identical" in out
