"""Chess move cases for A: data: the case of a legal move, samples of illegal moves of several kinds,
and positions from seeded random games (random endgame starts included)."""

from __future__ import annotations

import random
from typing import Iterator

import chess


def random_endgame_board(rng: random.Random, max_extra: int = 5) -> chess.Board:
    """A valid, not-yet-finished position with two kings and 1..max_extra other pieces."""
    kinds = [chess.PAWN, chess.ROOK, chess.KNIGHT, chess.BISHOP, chess.QUEEN]
    weights = [0.45, 0.2, 0.1, 0.1, 0.15]
    while True:
        board = chess.Board(None)
        squares = rng.sample(chess.SQUARES, 2 + max_extra)
        board.set_piece_at(squares[0], chess.Piece(chess.KING, chess.WHITE))
        board.set_piece_at(squares[1], chess.Piece(chess.KING, chess.BLACK))
        for square in squares[2 : 2 + rng.randint(1, max_extra)]:
            kind = rng.choices(kinds, weights)[0]
            if kind == chess.PAWN and chess.square_rank(square) in (0, 7):
                continue
            board.set_piece_at(square, chess.Piece(kind, rng.random() < 0.5))
        board.turn = rng.random() < 0.5
        if board.is_valid() and not board.is_game_over():
            return board


def legal_move_case(board: chess.Board, move: chess.Move) -> str:
    """Case label of a legal move; terminal outcomes take precedence over move kinds."""
    kind = "normal"
    if board.is_castling(move):
        kind = "castling"
    elif board.is_en_passant(move):
        kind = "en_passant"
    elif move.promotion:
        kind = "promotion"
    board.push(move)
    try:
        if board.is_checkmate():
            return "checkmate"
        if board.is_stalemate():
            return "stalemate"
        if board.is_insufficient_material():
            return "insufficient"
        if board.is_seventyfive_moves():
            return "seventyfive_moves"
        return kind
    finally:
        board.pop()


def illegal_moves(board: chess.Board, rng: random.Random) -> list[tuple[chess.Move, str]]:
    """A sample of illegal moves of several kinds, each with its kind."""
    us = board.turn
    legal = set(board.legal_moves)
    found: list[tuple[chess.Move, str]] = []
    for move in board.pseudo_legal_moves:
        if move in legal:
            continue
        piece = board.piece_at(move.from_square)
        if piece and piece.piece_type == chess.KING:
            kind = "castle_through_check" if board.is_castling(move) else "king_into_check"
        elif board.is_check():
            kind = "ignores_check"
        else:
            kind = "pinned_piece"
        found.append((move, kind))
    own = list(chess.SquareSet(board.occupied_co[us]))
    theirs = list(chess.SquareSet(board.occupied_co[not us]))
    empty = list(chess.SquareSet(~board.occupied))
    if len(own) > 1:
        a, b = rng.sample(own, 2)
        found.append((chess.Move(a, b), "own_piece_on_target"))
    if empty:
        found.append((chess.Move(rng.choice(empty), rng.choice(own + theirs)), "empty_from_square"))
    flipped = board.copy(stack=False)
    flipped.turn = not us
    wrong_side = [m for m in flipped.pseudo_legal_moves if m not in legal]
    if wrong_side:
        found.append((rng.choice(wrong_side), "wrong_side"))
    for _ in range(20):
        from_sq = rng.choice(own)
        to_sq = rng.choice(chess.SQUARES)
        move = chess.Move(from_sq, to_sq)
        if from_sq != to_sq and move not in legal and not board.is_pseudo_legal(move):
            if board.color_at(to_sq) != us:
                found.append((move, "impossible_geometry"))
                break
    found += [(chess.Move(m.from_square, m.to_square), "missing_promotion") for m in legal if m.promotion == chess.QUEEN]
    return found


def random_game_positions(rng: random.Random, n_games: int) -> Iterator[chess.Board]:
    """Positions of random-move games, biased to captures, promotions and pawn moves so that
    endgames, promotions and en-passant chances come up often."""
    for game in range(n_games):
        board = random_endgame_board(rng) if game % 3 == 0 else chess.Board()
        for _ in range(rng.randint(4, 200)):
            if board.is_game_over():
                break
            moves = list(board.legal_moves)
            forcing = [m for m in moves if board.is_capture(m) or m.promotion]
            pawn = [m for m in moves if board.piece_type_at(m.from_square) == chess.PAWN]
            pick = rng.random()
            pool = forcing if pick < 0.4 and forcing else pawn if pick < 0.7 and pawn else moves
            board.push(rng.choice(pool))
            yield board


def classify_position(board: chess.Board, rng: random.Random) -> dict[str, list[tuple[chess.Move, str]]]:
    """(move, detail) options per case reachable from this position; illegal moves are keyed
    "illegal:<kind>" so that every kind can get its share."""
    options: dict[str, list[tuple[chess.Move, str]]] = {}
    for move in list(board.legal_moves):
        options.setdefault(legal_move_case(board, move), []).append((move, ""))
    for move, kind in illegal_moves(board, rng):
        options.setdefault(f"illegal:{kind}", []).append((move, kind))
    return options
