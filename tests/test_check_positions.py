"""New positions in check for the warm start: one checking move from real annotated positions."""
from __future__ import annotations

import os
import random
from pathlib import Path

import chess
import pytest

from rookworld.commands import annotate
from rookworld.commands.check_positions import main as check_positions_main
from rookworld.data import check_positions
from rookworld.data.records import excluded_positions, position_key, read_jsonl
from rookworld.tasks.arbiter import MAX_HISTORY

PARENTS = Path(check_positions.__file__).parent / "bundled" / "validation.jsonl.gz"
HELD_OUT = Path(check_positions.__file__).parent / "bundled" / "test.jsonl.gz"


def test_every_child_is_a_new_ongoing_position_in_check_one_move_from_its_parent() -> None:
    parents = read_jsonl(PARENTS)
    exclude = excluded_positions([str(HELD_OUT)]) | {position_key(p["fen"]) for p in parents}
    children = list(check_positions.derive(parents, random.Random(0), 1.0, exclude))
    assert len(children) > 0.3 * len(parents)

    keys = [position_key(c["fen"]) for c in children]
    assert len(set(keys)) == len(keys) and not set(keys) & exclude
    for child in children:
        board = chess.Board(child["fen"])
        assert board.is_check() and not board.is_game_over()
        assert child["source"].startswith("check:selfplay") and "game" not in child  # bundled rows: no game
        assert len(child["history"]) <= MAX_HISTORY


def test_a_child_is_its_parent_after_the_last_move_of_its_history() -> None:
    for parent in read_jsonl(PARENTS)[:30]:
        for child in check_positions.derive([parent], random.Random(1), 1.0, frozenset()):
            board = chess.Board(parent["fen"])
            board.push_uci(child["history"][-1])
            assert board.fen() == child["fen"]
            assert child["history"][:-1] == parent["history"][-(MAX_HISTORY - 1):]
            assert child.get("game") == parent.get("game")


def test_the_same_seed_makes_the_same_children_and_the_fraction_samples_parents() -> None:
    parents = read_jsonl(PARENTS)
    derive = check_positions.derive
    first, again = (list(derive(parents, random.Random(5), 1.0, frozenset())) for _ in range(2))
    assert first == again
    assert len(list(derive(parents, random.Random(5), 0.2, frozenset()))) < len(parents) * 0.3


def test_a_bad_fraction_is_refused_in_one_line(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        check_positions_main([str(PARENTS), "--output", "x.jsonl", "--fraction", "1.5"])
    assert "--fraction 1.5: must be in (0, 1]" in capsys.readouterr().err


@pytest.mark.parametrize("text, named", [(None, "nowhere.jsonl"), ('{"fen": "not a fen"}\n', "not a fen"),
                                         ('{"history": []}\n', "parents.jsonl:1: missing key 'fen'")])
def test_a_missing_file_or_bad_record_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                             text: str | None, named: str) -> None:
    parents = tmp_path / ("nowhere.jsonl" if text is None else "parents.jsonl")
    if text is not None:
        parents.write_text(text)
    with pytest.raises(SystemExit) as exit_info:
        check_positions_main([str(parents), "--output", str(tmp_path / "out.jsonl")])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # after the progress bar, if it started
    assert exit_info.value.code == 2 and last.startswith("check_positions: error:") and named in last
    assert "Traceback" not in err


@pytest.mark.skipif(not os.access("/usr/games/stockfish", os.X_OK), reason="needs Stockfish")
def test_the_command_then_relabel_gives_training_rows_whose_best_move_is_legal(tmp_path: Path) -> None:
    children = tmp_path / "check.jsonl.gz"
    check_positions_main([str(PARENTS), "--output", str(children), "--exclude", str(HELD_OUT), "--fraction", "0.05"])
    labelled = tmp_path / "labelled.jsonl"
    annotate.main(["--relabel", str(children), "--output", str(labelled), "--nodes", "300", "--workers", "2"])
    rows = read_jsonl(labelled)
    assert rows and [r["fen"] for r in rows] == [r["fen"] for r in read_jsonl(children)]
    for row in rows:
        board = chess.Board(row["fen"])
        assert 1 <= len(row["candidates"]) <= 5 and row["limit"] == {"nodes": 300}
        assert all(chess.Move.from_uci(c["move"]) in board.legal_moves for c in row["candidates"])
