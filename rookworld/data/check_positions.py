"""New positions in check, one checking move away from annotated positions, for the supervised warm
start (`python -m rookworld.commands.check_positions` writes them).

A position in check is where a warm start most often proposes an illegal best move: only king
moves, captures of the checker and interpositions are legal, and the model has to see that. The
self-play train split has 7.2% of them. One checking move is played (chosen
with a seeded coin among all of them) from each sampled parent position and the child is kept when it is
new: not mate or stalemate, not in the input, not in an --exclude file, not made twice. Each row keeps
its parent's game and split (a derived position stays on its parent's side of every split), and has
no candidates yet: label it with the annotator's --relabel, which keeps every other field.
"""

from __future__ import annotations

import random
from typing import Iterable, Iterator

import chess

from rookworld.data.phase import game_phase
from rookworld.data.records import new_only
from rookworld.tasks.arbiter import MAX_HISTORY


def checking_moves(board: chess.Board) -> list[chess.Move]:
    """Legal moves after which the other side is in check and the game goes on."""
    moves = []
    for move in board.legal_moves:
        if not board.gives_check(move):
            continue
        board.push(move)
        if not board.is_game_over():
            moves.append(move)
        board.pop()
    return moves


def child_in_check(record: dict, rng: random.Random) -> dict | None:
    """The parent after one checking move drawn at random (no candidates yet); None if it has none."""
    board = chess.Board(record["fen"])
    moves = checking_moves(board)
    if not moves:
        return None
    move = rng.choice(moves)
    board.push(move)
    history = (list(record.get("history", [])) + [move.uci()])[-MAX_HISTORY:]
    kept = {field: record[field] for field in ("game", "split") if field in record}
    return {"fen": board.fen(), "history": history, "phase": game_phase(board),
            "source": f"check:{record.get('source', 'unknown')}", **kept}


def derive(records: Iterable[dict], rng: random.Random, fraction: float, exclude: frozenset[str]) -> Iterator[dict]:
    """One child in check per sampled parent, new positions only, in input order."""
    sampled = (record for record in records if rng.random() < fraction)
    children = (child_in_check(record, rng) for record in sampled)
    return new_only((child for child in children if child is not None), exclude)
