"""Colour-flipped copies of annotated positions, labels included (`python -m rookworld.commands.mirror`
writes them).

Chess is symmetric under a colour flip: mirror the board top to bottom and swap the colours of the
pieces, the side to move, the castling rights and the en-passant square (python-chess's
`Board.mirror`), and every move keeps its value for the side to move. Evaluations are written from the
side to move's point of view (docs/tasks.md), so they carry over unchanged; only the squares of the
moves mirror (e2e4 becomes e7e5). A flipped copy is a new position for the supervised warm start at
the cost of no engine time.

A copy is kept only when it is new: not in the input, not in an --exclude file (the held-out and RL
parts), not made twice. It keeps its parent's game and split, so a derived position stays on its
parent's side of every split.
"""

from __future__ import annotations

from typing import Iterable, Iterator

import chess

from rookworld.data.records import new_only


def mirror_move(uci: str) -> str:
    """The same move on the colour-flipped board: files stay, ranks flip (e2e4 -> e7e5)."""
    move = chess.Move.from_uci(uci)
    flipped = chess.Move(chess.square_mirror(move.from_square), chess.square_mirror(move.to_square),
                         promotion=move.promotion, drop=move.drop)
    return flipped.uci()


def mirror_record(record: dict) -> dict:
    """The record of the colour-flipped position: FEN, history, candidates and action values."""
    flipped = dict(record)
    board = chess.Board(record["fen"]).mirror()
    if board.turn == chess.WHITE:  # White moves first: its turn comes one full move later
        board.fullmove_number += 1
    flipped["fen"] = board.fen()
    if "history" in record:
        flipped["history"] = [mirror_move(m) for m in record["history"]]
    if "candidates" in record:
        flipped["candidates"] = [{**c, "move": mirror_move(c["move"])} for c in record["candidates"]]
    if "action_values" in record:  # best first, ties by UCI (rookworld/data/action_values.py)
        values = [[mirror_move(m), v] for m, v in record["action_values"]]
        flipped["action_values"] = sorted(values, key=lambda mv: (-mv[1], mv[0]))
    flipped["source"] = f"mirror:{record.get('source', 'unknown')}"
    return flipped


def mirrored(records: Iterable[dict], exclude: frozenset[str]) -> Iterator[dict]:
    """The flipped copy of each record whose position is new, in input order."""
    return new_only(map(mirror_record, records), exclude)
