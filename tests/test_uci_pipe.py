"""rookworld.stockfish.uci_pipe: the same analyses as rookworld.stockfish.engine's python-chess path, over raw pipes."""
from __future__ import annotations

import os
import random
import signal
import time

import chess
import pytest

from rookworld.stockfish.engine import Engine
from rookworld.stockfish.uci_pipe import PipeEngine, parse_pv_line

STOCKFISH = "/usr/games/stockfish"
pytestmark = pytest.mark.skipif(not os.access(STOCKFISH, os.X_OK), reason="needs Stockfish")

SPECIAL_FENS = [
    chess.STARTING_FEN,  # sent as `position startpos`
    "6k1/5ppp/8/8/8/8/r4PPP/6K1 b - - 0 1",  # black mates in one
    "7k/8/8/8/8/8/8/K6R b - - 0 1",  # two legal moves: two lines
    "6k1/5ppp/8/8/8/8/5PPP/3r2K1 w - - 0 1",  # mated: no lines
    "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3",  # en passant
    "r3k2r/pppq1ppp/2npbn2/4p3/4P3/2NPBN2/PPPQ1PPP/R3K2R w KQkq - 4 8",  # castling either side
    "8/P7/8/8/8/8/k6p/4K3 w - - 0 60",  # promotions
]


def random_game_fens(n: int, seed: int) -> list[str]:
    rng, board, fens = random.Random(seed), chess.Board(), []
    while len(fens) < n:
        if board.is_game_over():
            board = chess.Board()
        board.push(rng.choice(list(board.legal_moves)))
        fens.append(board.fen())
    return fens


def test_the_lines_equal_those_of_the_python_chess_engine() -> None:
    fens = SPECIAL_FENS + random_game_fens(20, seed=1)
    with Engine(STOCKFISH, nodes=3000) as reference, PipeEngine(STOCKFISH, nodes=3000) as pipe:
        assert pipe.name == reference.name
        assert pipe.limit_record == reference.limit_record == {"nodes": 3000}
        for fen in fens:
            assert pipe.analyse_lines(fen) == reference.analyse_lines(fen), fen
            assert pipe.analyse(fen) == reference.analyse(fen), fen
    assert pipe.analyse_lines(SPECIAL_FENS[3]) == ()


def test_a_depth_limit_and_one_line_agree_too() -> None:
    fens = random_game_fens(10, seed=2)
    with Engine(STOCKFISH, depth=7, multipv=1) as reference, PipeEngine(STOCKFISH, depth=7, multipv=1) as pipe:
        assert [pipe.analyse_lines(fen) for fen in fens] == [reference.analyse_lines(fen) for fen in fens]


def test_the_cache_counts_analyses_and_a_killed_engine_is_restarted() -> None:
    fens = random_game_fens(5, seed=3)
    with PipeEngine(STOCKFISH, nodes=500) as engine:
        first = [engine.analyse(fen) for fen in fens]
        assert [engine.analyse(fen) for fen in fens] == first and engine.cache_misses == 5
        pid = engine.pid
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid)
        assert engine.analyse_lines(fens[0])  # one fresh start
        restarted = engine.pid
        assert restarted != pid
    _wait_gone(restarted)  # close stopped it


def _wait_gone(pid: int, seconds: float = 10.0) -> None:
    """Wait until process `pid` has exited (reaped by its parent or a zombie no more running)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().split(") ", 1)[1].startswith(("Z", "X")):
                    return
        except FileNotFoundError:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} still runs after {seconds} s")


def test_a_pv_line_is_read_for_its_index_move_score_and_depth() -> None:
    line = ("info depth 11 seldepth 14 multipv 3 score cp -37 upperbound nodes 9876 nps 900000 hashfull 4 "
            "tbhits 0 time 11 pv g8f6 b1c3")
    assert parse_pv_line(line) == (3, "g8f6", -0.37, 11)
    assert parse_pv_line("info depth 3 seldepth 3 multipv 1 score mate -2 nodes 90 pv h8g8 a1a8")[2] == -999.98
