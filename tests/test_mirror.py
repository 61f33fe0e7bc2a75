"""Colour-flipped copies of annotated positions: the same chess, new positions, labels carried over."""
from __future__ import annotations

from pathlib import Path

import chess
import pytest

from rookworld.commands.mirror import main as mirror_main
from rookworld.data import mirror
from rookworld.data.records import excluded_positions, position_key, read_jsonl

BUNDLED = Path(mirror.__file__).parent / "bundled"
ROWS = BUNDLED / "validation.jsonl.gz"
HELD_OUT = BUNDLED / "test.jsonl.gz"
RL_ROWS = Path(mirror.__file__).parent / "selfplay" / "rl.jsonl.xz"


def test_a_flipped_row_is_the_same_chess_for_the_other_colour() -> None:
    for row in read_jsonl(ROWS)[:200]:
        flipped = mirror.mirror_record(row)
        board, twin = chess.Board(row["fen"]), chess.Board(flipped["fen"])
        assert twin.turn != board.turn and twin.is_check() == board.is_check()
        assert twin.piece_map() == {chess.square_mirror(s): chess.Piece(p.piece_type, not p.color)
                                    for s, p in board.piece_map().items()}
        assert [c["eval"] for c in flipped["candidates"]] == [c["eval"] for c in row["candidates"]]
        assert twin.legal_moves.count() == board.legal_moves.count()
        assert all(chess.Move.from_uci(c["move"]) in twin.legal_moves for c in flipped["candidates"])
        assert flipped["source"] == f"mirror:{row['source']}"


def test_flipping_twice_gives_the_position_and_moves_back() -> None:
    for row in read_jsonl(ROWS)[:200]:
        back = mirror.mirror_record(mirror.mirror_record(row))
        assert position_key(back["fen"]) == position_key(row["fen"])
        assert back["candidates"] == row["candidates"] and back["history"] == row["history"]


def test_the_move_number_stays_one_a_real_game_could_have() -> None:
    start = {"fen": chess.STARTING_FEN, "history": [], "candidates": []}
    assert mirror.mirror_record(start)["fen"].endswith(" b KQkq - 0 1")
    after_e4 = {"fen": "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1", "history": ["e2e4"]}
    flipped = mirror.mirror_record(after_e4)
    assert flipped["fen"] == "rnbqkbnr/pppp1ppp/8/4p3/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 2"
    assert flipped["history"] == ["e7e5"]


def test_action_values_flip_and_stay_best_first_ties_by_uci() -> None:
    row = read_jsonl(RL_ROWS)[0]
    flipped = mirror.mirror_record(row)["action_values"]
    assert sorted(v for _, v in flipped) == sorted(v for _, v in row["action_values"])
    assert flipped == sorted(flipped, key=lambda mv: (-mv[1], mv[0]))
    assert {m for m, _ in flipped} == {m.uci() for m in chess.Board(mirror.mirror_record(row)["fen"]).legal_moves}


def test_only_new_positions_are_kept_and_held_out_ones_never(tmp_path: Path) -> None:
    rows = read_jsonl(ROWS)
    symmetric = {"fen": "4k3/8/8/8/8/8/8/4K3 w - - 0 1", "history": [], "candidates": []}  # its flip: Black to move
    twin = mirror.mirror_record(symmetric)
    exclude = excluded_positions([str(HELD_OUT)]) | {position_key(twin["fen"])}
    kept = list(mirror.mirrored([*rows, symmetric, rows[0]], exclude))
    keys = [position_key(k["fen"]) for k in kept]
    assert len(keys) == len(set(keys)) == len(rows)  # the repeated row and the excluded twin are not kept
    assert not set(keys) & exclude


def test_the_command_writes_the_new_copies_and_refuses_a_bad_row_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "flipped.jsonl.gz"
    mirror_main([str(ROWS), "--output", str(out), "--exclude", str(HELD_OUT)])
    assert len(read_jsonl(out)) == len(read_jsonl(ROWS))
    assert "wrote 1542 flipped positions" in capsys.readouterr().err

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"fen": "8/8/8/8/8/8/8/K6k w - - 0 1", "candidates": [{"move": "zz", "eval": 0}]}\n')
    with pytest.raises(SystemExit) as exit_info:
        mirror_main([str(bad), "--output", str(tmp_path / "x.jsonl")])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_info.value.code == 2 and last.startswith("mirror: error:") and "zz" in last
