"""Action values: every legal move's engine value, reproducible in another process and order, resumable."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import chess
import pytest

from rookworld.commands import annotate
from rookworld.commands.action_value_agreement import LabelComparison, compare
from rookworld.data.action_values import action_values, block_path
from rookworld.data.positions import BUNDLED_DIR
from rookworld.data.records import read_jsonl, write_jsonl
from rookworld.data.run_folder import DONE_FILE
from rookworld.stockfish.engine import Engine

from annotate_helpers import interrupt_after_first_part, kill_after_first_part

pytestmark = pytest.mark.skipif(not os.access("/usr/games/stockfish", os.X_OK), reason="needs Stockfish")

VALIDATION = BUNDLED_DIR / "validation.jsonl.gz"
MATE_IN_ONE = "6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1"  # a1a8 mates
CHECKMATED = "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3"  # fool's mate: no legal move
NODES = 300


def positions(tmp_path: Path, n: int, name: str = "in.jsonl") -> Path:
    """The first n validation records, a mate in one and a checkmated position."""
    records = read_jsonl(VALIDATION)[:n]
    records += [{"fen": MATE_IN_ONE, "source": "hand"}, {"fen": CHECKMATED, "source": "hand"}]
    path = tmp_path / name
    write_jsonl(path, records)
    return path


def run(source: Path, folder: Path, output: Path, workers: int, *extra: str) -> list[dict]:
    annotate.main(["--action-values", str(source), "--output", str(output), "--shards", str(folder),
                   "--nodes", str(NODES), "--workers", str(workers), *extra])
    return read_jsonl(output)


def test_values_are_the_same_in_another_process_and_order(tmp_path: Path) -> None:
    source = positions(tmp_path, 2)
    rows = run(source, tmp_path / "two", tmp_path / "two.jsonl", 2, "--positions-per-block", "2")
    inputs = read_jsonl(source)
    reversed_source = tmp_path / "reversed.jsonl"
    write_jsonl(reversed_source, inputs[::-1])
    rows_reversed = run(reversed_source, tmp_path / "one", tmp_path / "one.jsonl.xz", 1)
    assert rows_reversed[::-1] == rows  # other order, other worker count
    assert (tmp_path / "one.jsonl.xz").read_bytes()[:6] == b"\xfd7zXZ\x00"  # an .xz output is xz-compressed
    assert [{k: v for k, v in row.items() if not k.startswith("action_values")} for row in rows] == inputs  # unchanged
    with Engine(nodes=NODES, cache_size=0) as engine:  # this process, positions after one another
        assert [action_values(engine, row["fen"]) for row in reversed(rows)] == [r["action_values"] for r in rows_reversed]


def test_every_legal_move_once_best_first_mates_and_no_legal_move(tmp_path: Path) -> None:
    rows = run(positions(tmp_path, 2), tmp_path / "run", tmp_path / "out.jsonl.gz", 2)
    for row in rows:
        moves = [move for move, _ in row["action_values"]]
        assert sorted(moves) == sorted(move.uci() for move in chess.Board(row["fen"]).legal_moves)
        assert len(set(moves)) == len(moves)
        keys = [(-value, move) for move, value in row["action_values"]]
        assert keys == sorted(keys)  # best first, ties by UCI
        assert row["action_values_limit"] == {"nodes": NODES}
    by_fen = {row["fen"]: row["action_values"] for row in rows}
    assert by_fen[MATE_IN_ONE][0] == ["a1a8", 999.99]
    assert all(value < 900 for _, value in by_fen[MATE_IN_ONE][1:])
    assert by_fen[CHECKMATED] == []
    opening = rows[0]  # the values agree with the position's deep label in sign and rough size
    assert abs(dict(opening["action_values"])[opening["candidates"][0]["move"]]) < 1.0


def test_a_killed_run_resumes_to_the_bytes_of_an_unkilled_one(tmp_path: Path) -> None:
    source = positions(tmp_path, 6)
    args = ["--action-values", str(source), "--nodes", str(NODES), "--positions-per-block", "1"]
    unkilled = tmp_path / "unkilled.jsonl.gz"
    annotate.main([*args, "--output", str(unkilled), "--shards", str(tmp_path / "unkilled"), "--workers", "2"])

    killed, folder = tmp_path / "killed.jsonl.gz", tmp_path / "killed"
    blocks_at_kill = kill_after_first_part([*args, "--output", str(killed), "--shards", str(folder), "--workers", "2"],
                                           folder)["blocks"]
    assert 1 <= blocks_at_kill < 8 and not killed.exists()

    annotate.main([*args, "--output", str(killed), "--shards", str(folder), "--workers", "1"])  # another count
    assert killed.read_bytes() == unkilled.read_bytes()
    done = json.loads((folder / DONE_FILE).read_text())
    assert done["blocks"] == done["positions"] == 8 and all(block_path(folder, b).exists() for b in range(8))


def test_ctrl_c_stops_the_run_its_workers_and_engines_in_one_line_and_the_same_command_goes_on(tmp_path: Path) -> None:
    source = positions(tmp_path, 6)
    args = ["--action-values", str(source), "--nodes", str(NODES), "--positions-per-block", "1", "--workers", "2"]
    unstopped = tmp_path / "unstopped.jsonl.gz"
    annotate.main([*args, "--output", str(unstopped), "--shards", str(tmp_path / "unstopped")])

    stopped, folder = tmp_path / "stopped.jsonl.gz", tmp_path / "stopped"
    code, stderr, left = interrupt_after_first_part([*args, "--output", str(stopped), "--shards", str(folder)], folder)
    messages = [line for line in stderr.splitlines() if line.strip() and "action values:" not in line]  # bar aside
    assert (code, messages) == (130, [f"annotate: stopped by SIGINT; {folder} keeps what was written, "
                                      "and the same command goes on from there"])
    assert left == []  # no worker and no engine outlives the run
    assert not stopped.exists()

    annotate.main([*args, "--output", str(stopped), "--shards", str(folder)])
    assert stopped.read_bytes() == unstopped.read_bytes()


def test_a_resume_with_another_node_budget_is_refused_in_one_line(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    source = tmp_path / "in.jsonl"
    write_jsonl(source, [{"fen": MATE_IN_ONE}])
    run(source, tmp_path / "run", tmp_path / "out.jsonl", 1)
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        annotate.main(["--action-values", str(source), "--output", str(tmp_path / "out.jsonl"), "--shards",
                       str(tmp_path / "run"), "--nodes", "500"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and "other settings" in err and "500" in err


@pytest.mark.parametrize("bad_line, message", [('{"fen": "not a fen"}', "'not a fen'"),
                                               ('{"fen": ', "not valid JSON"),
                                               ('{"history": []}', "missing key 'fen'")])
def test_a_bad_input_line_is_named_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, bad_line: str,
                                               message: str) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"fen": MATE_IN_ONE}) + "\n" + bad_line + "\n")
    with pytest.raises(SystemExit) as info:
        run(source, tmp_path / "run", tmp_path / "out.jsonl", 1)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and f"{source}:2: " in err and message in err
    assert not (tmp_path / "run").exists()  # refused before any work


def test_the_action_value_flags_are_checked(capsys: pytest.CaptureFixture) -> None:
    for argv, message in ((["--output", "o.jsonl", "--shards", "d"], "needs --nodes"),
                          (["--output", "o.jsonl", "--nodes", "300"], "needs --output FILE and --shards DIR"),
                          (["--output", "o.jsonl", "--shards", "d", "--nodes", "300", "--threads", "2"], "one thread")):
        with pytest.raises(SystemExit):
            annotate.main(["--action-values", "in.jsonl", *argv])
        assert message in capsys.readouterr().err


def test_the_agreement_check_compares_with_the_labels_as_its_docs_say() -> None:
    def lichess(centipawns: float) -> float:  # the docs' logistic
        return 1 / (1 + math.exp(-0.00368208 * centipawns))

    record = {"candidates": [{"move": "e2e4", "eval": 0.30}, {"move": "d2d4", "eval": 0.28}]}
    result = compare(record, [["d2d4", 0.40], ["e2e4", 0.20], ["g1f3", 0.10]], tolerance=0.05)
    assert result.best_agrees  # d2d4 is a label line 0.02 pawn below line 1
    assert result.deep_best_loss == pytest.approx(lichess(40) - lichess(20))
    assert result.value_error == pytest.approx((abs(lichess(20) - lichess(30)) + abs(lichess(40) - lichess(28))) / 2)
    assert not compare(record, [["g1f3", 0.5], ["e2e4", 0.2], ["d2d4", 0.1]], tolerance=0.05).best_agrees
    mate = {"candidates": [{"move": "a1a8", "eval": 999.99}]}
    assert compare(mate, [["a1a8", 999.99], ["a1a2", 3.0]], tolerance=0.05) == LabelComparison(True, 0.0, 0.0)
