"""A position's game phase, as the annotated records store it."""
from __future__ import annotations

import chess

ENDGAME_MAX_PIECES = 6  # non-pawn, non-king pieces of both sides (Lichess "divider" rule)
OPENING_MAX_FULLMOVE = 10


def game_phase(board: chess.Board) -> str:
    """endgame (<= 6 knights, bishops, rooks and queens in all), else opening up to move 10, else middlegame."""
    pieces = sum(
        len(board.pieces(piece_type, color))
        for piece_type in (chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN)
        for color in chess.COLORS
    )
    if pieces <= ENDGAME_MAX_PIECES:
        return "endgame"
    if board.fullmove_number <= OPENING_MAX_FULLMOVE:
        return "opening"
    return "middlegame"
