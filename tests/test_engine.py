"""rookworld.stockfish.engine: one persistent process, cache, side-to-move ranking, reliable shutdown."""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import chess
import chess.engine
import pytest

from rookworld.stockfish.engine import Engine, EngineNotFoundError, analyse_many, score_to_pawns
from rookworld.tasks import Candidate

STOCKFISH = "/usr/games/stockfish"
pytestmark = pytest.mark.skipif(not os.access(STOCKFISH, os.X_OK), reason="needs Stockfish")

BLACK_MATES_IN_ONE = "6k1/5ppp/8/8/8/8/r4PPP/6K1 b - - 0 1"  # only ...Ra1# mates
REPO_ROOT = Path(__file__).resolve().parents[1]


def distinct_fens(n: int, seed: int = 0) -> list[str]:
    rng, board, fens = random.Random(seed), chess.Board(), []
    while len(fens) < n:
        board.push(rng.choice(list(board.legal_moves)))
        fens.append(board.fen())
    return fens


def process_gone(pid: int, wait_s: float = 5.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.05)
    return False


def test_200_analyses_reuse_one_process_and_the_cache() -> None:
    fens = distinct_fens(20)
    with Engine(STOCKFISH, depth=6) as engine:
        pid = engine.pid
        pids = set()
        for _ in range(10):
            for fen in fens:
                engine.analyse(fen)
                pids.add(engine.pid)
        assert pids == {pid}
        assert (engine.cache_misses, engine.cache_hits) == (20, 180)
    assert process_gone(pid)


def test_black_to_move_rank_one_is_the_engines_best_move() -> None:
    board = chess.Board(BLACK_MATES_IN_ONE)
    with Engine(STOCKFISH, depth=10) as engine:
        candidates = engine.analyse(BLACK_MATES_IN_ONE)
    with chess.engine.SimpleEngine.popen_uci(STOCKFISH) as direct:
        played = direct.play(board, chess.engine.Limit(depth=10)).move
        single = direct.analyse(board, chess.engine.Limit(depth=10), multipv=1)[0]
    assert candidates[0].move == played.uci() == single["pv"][0].uci() == "a2a1"
    assert candidates[0].eval == 999.99
    assert [c.eval for c in candidates] == sorted((c.eval for c in candidates), reverse=True)


def test_evals_are_side_to_move_pov_and_fewer_lines_when_fewer_moves() -> None:
    losing_black = "7k/8/8/8/8/8/8/K6R b - - 0 1"  # two legal moves, Black is lost
    with Engine(STOCKFISH, depth=8) as engine:
        candidates = engine.analyse(losing_black)
        mated = engine.analyse("6k1/5ppp/8/8/8/8/5PPP/3r2K1 w - - 0 1")
    assert sorted(c.move for c in candidates) == ["h8g7", "h8g8"]
    assert all(c.eval < -3 for c in candidates)
    assert mated == ()


@pytest.mark.parametrize(
    "score, pawns",
    [
        (chess.engine.Mate(15), 999.85),
        (chess.engine.Mate(1), 999.99),
        (chess.engine.Mate(-3), -999.97),
        (chess.engine.Cp(31), 0.31),
        (chess.engine.Cp(-207), -2.07),
        (chess.engine.Cp(0), 0.0),
    ],
)
def test_score_to_pawns(score: chess.engine.Score, pawns: float) -> None:
    assert score_to_pawns(score) == pawns


def test_missing_binary_one_line_error_names_the_config_key() -> None:
    with pytest.raises(EngineNotFoundError) as info:
        Engine(path="/nope")
    message = str(info.value)
    assert "\n" not in message and "'/nope'" in message and "--engine-path" in message


@pytest.mark.parametrize(
    "kwargs",
    [{"depth": 10, "time_limit": 0.1}, {"depth": None, "time_limit": None}, {"depth": 0}, {"multipv": 0},
     {"depth": 10, "nodes": 1000}, {"depth": None, "nodes": 0}],
)
def test_invalid_limits_fail_at_construction(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Engine(STOCKFISH, **kwargs)


def test_close_is_idempotent_and_forgotten_engine_is_collected() -> None:
    engine = Engine(STOCKFISH, depth=4)
    engine.analyse(chess.STARTING_FEN)
    pid = engine.pid
    engine.close()
    engine.close()
    assert engine.pid is None and process_gone(pid)
    forgotten = Engine(STOCKFISH, depth=4)
    forgotten.analyse(chess.STARTING_FEN)
    pid = forgotten.pid
    del forgotten
    gc.collect()
    assert process_gone(pid)


CHILD = """
import atexit, pathlib, sys
from rookworld.stockfish.engine import Engine
engine = Engine({path!r}, depth=4)
engine.analyse("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1")
pid = engine.pid
print("PID", pid, flush=True)

def report():  # plain atexit hooks run after the engine shutdown hook
    status = pathlib.Path(f"/proc/{{pid}}/status")
    state = next((l.split()[1] for l in status.read_text().splitlines() if l.startswith("State:")), "?") if status.exists() else "gone"
    print("STATE", state, flush=True)

atexit.register(report)
{ending}
"""


@pytest.mark.parametrize("ending", ["pass", "raise RuntimeError('boom')"], ids=["forgot-close", "exception"])
def test_no_engine_process_outlives_the_program(ending: str) -> None:
    code = textwrap.dedent(CHILD.format(path=STOCKFISH, ending=ending))
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    lines = dict(line.split(maxsplit=1) for line in done.stdout.splitlines() if line.startswith(("PID ", "STATE ")))
    assert done.returncode == (0 if ending == "pass" else 1), done.stderr
    assert lines["STATE"] == "gone"  # exited and reaped (no zombie) before the interpreter ended
    assert process_gone(int(lines["PID"]), wait_s=1.0)


def test_a_killed_engine_process_is_restarted_once() -> None:
    import signal

    with Engine(STOCKFISH, depth=4) as engine:
        engine.analyse(chess.STARTING_FEN)
        old_pid = engine.pid
        os.kill(old_pid, signal.SIGKILL)
        assert process_gone(old_pid)
        assert engine.analyse(BLACK_MATES_IN_ONE)[0].move == "a2a1"
        assert engine.pid not in (None, old_pid)


def test_engine_config_instantiates_with_every_knob() -> None:
    from omegaconf import OmegaConf

    from rookworld.app.config import build

    cfg = OmegaConf.load(REPO_ROOT / "conf" / "engine" / "stockfish.yaml")
    engine = build(cfg)
    assert isinstance(engine, Engine) and engine.pid is None  # started lazily
    knobs = {key: value for key, value in OmegaConf.to_container(cfg).items() if key != "_target_"}
    assert set(knobs) == {"path", "depth", "nodes", "time_limit", "threads", "hash_mb", "multipv", "cache_size",
                          "timeout"}
    assert {key: getattr(engine, key) for key in knobs} == knobs


def test_labels_do_not_depend_on_the_order_or_the_process() -> None:
    """Each analysis starts from a cleared hash: forward, reversed and two worker processes agree."""
    from rookworld.data.records import read_jsonl
    from rookworld.data.positions import BUNDLED

    fens = [r["fen"] for r in read_jsonl(BUNDLED["policy_validation"])[:40:4]]
    limit = {"depth": None, "nodes": 20_000}
    with Engine(STOCKFISH, cache_size=0, **limit) as engine:
        forward = [engine.analyse(fen) for fen in fens]
        backward = [engine.analyse(fen) for fen in reversed(fens)][::-1]
    in_workers = analyse_many(fens, 2, path=STOCKFISH, **limit)
    assert forward == backward == in_workers
    assert all(candidates for candidates in forward)


def test_label_stability_curve_and_choice(capsys: pytest.CaptureFixture) -> None:
    from rookworld.commands import label_stability
    from rookworld.commands.label_stability import StabilityStep, choose_nodes

    label_stability.main(["--sample", "4", "--ladder", "2000", "4000", "8000", "--engine-path", STOCKFISH])
    table = capsys.readouterr().out
    assert table.count("\n| ") == 3 and "| 8,000 | - | - | 100.0% |" in table

    def step(nodes: int, stays: float | None, seconds: float) -> StabilityStep:
        return StabilityStep(nodes, stays, stays, 0.5, seconds)

    curve = [step(1, 0.60, 0.1), step(2, 0.70, 0.2), step(4, 0.71, 0.4), step(8, 0.80, 0.8), step(16, None, 1.6)]
    assert choose_nodes(curve, 1.0, 0.02)[0] == 2       # 2 -> 4 gains 1 point: flat
    assert choose_nodes(curve, 0.15, 0.02)[0] == 1      # only the first step fits: the largest that fits
    assert choose_nodes(curve, 1.0, 0.005)[0] == 8      # never flat within the budget: the largest that fits


def test_candidates_keep_stockfishs_line_order() -> None:
    """The labels' rank 1 is Stockfish's line 1 (no re-sort by eval): the candidates are the lines in
    Stockfish's order, deeper lines first, each depth's lines best first."""
    fens = distinct_fens(12, seed=3)
    with Engine(STOCKFISH, nodes=3_000, cache_size=0) as engine:
        for fen in fens:
            lines = engine.analyse_lines(fen)
            assert engine.analyse(fen) == tuple(Candidate(line.move, line.eval) for line in lines)
            depths = [line.depth for line in lines]
            assert depths == sorted(depths, reverse=True)
            for depth in set(depths):
                evals = [line.eval for line in lines if line.depth == depth]
                assert evals == sorted(evals, reverse=True)


def test_an_engine_needs_a_limit() -> None:
    with pytest.raises(ValueError, match="exactly one of engine.depth / engine.nodes / engine.time_limit"):
        Engine(STOCKFISH)


def test_agreement_curve_against_a_cached_reference(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from rookworld.commands import agreement
    from rookworld.commands.agreement import AgreementStep, choose_nodes

    cache = tmp_path / "cache.json"
    argv = ["--sample", "4", "--reference-nodes", "20000", "--ladder", "2000", "20000", "--engine-path", STOCKFISH,
            "--cache", str(cache), "--json", str(tmp_path / "curve.json")]
    agreement.main(argv)
    table = capsys.readouterr().out
    assert "| 20,000 | 100.0% |" in table  # the reference's own budget agrees with itself
    stored = cache.read_text()
    agreement.main(argv)  # everything cached: nothing is analysed again
    assert cache.read_text() == stored and capsys.readouterr().out == table

    def step(nodes: int, agrees: float, seconds: float) -> AgreementStep:
        return AgreementStep(nodes, agrees, agrees, agrees, agrees, agrees, seconds)

    curve = [step(1, 0.6, 0.1), step(2, 0.75, 0.2), step(4, 0.82, 0.4), step(8, 0.85, 0.8)]
    assert choose_nodes(curve, 0.8)[0] == 4                # the smallest that reaches the target
    assert choose_nodes(curve, 0.8, 0.25)[0] == 2          # 4 does not fit: the largest that does
    assert choose_nodes(curve, 0.9)[0] == 8


def test_a_label_move_outside_the_reference_lines_is_judged_by_its_own_deep_eval() -> None:
    from rookworld.commands.agreement import agrees
    from rookworld.stockfish.engine import Line

    reference = (Line("h7h4", 999.89, 32), Line("g3f3", 999.87, 32))
    assert agrees("h7h4", reference, 0.05, {})
    assert not agrees("g3f3", reference, 0.01, {})
    assert agrees("h7b7", reference, 0.05, {"h7b7": 999.89})       # another mate of the same length
    assert not agrees("e3f2", (Line("b3c2", 1.71, 20),), 0.05, {"e3f2": 1.59})
    with pytest.raises(KeyError, match="e3f2: not in the reference's lines"):
        agrees("e3f2", reference, 0.05, {})

    back_rank_mate = "6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1"
    with Engine(STOCKFISH, nodes=20_000, cache_size=0) as engine:
        assert engine.evaluate_move(back_rank_mate, "a1a8") == 999.99      # mate in 1
        assert engine.evaluate_move(back_rank_mate, "a1a2") < 900           # searched alone, no mate
