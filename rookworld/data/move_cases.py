"""Chess move cases for A: data: the case of a legal move, samples of illegal moves of several kinds,
the rare legal cases of a position, and positions from seeded random games (random endgame starts
included).

A move's case is one of CASES (docs/tasks.md): a legal move is "normal", "castling", "en_passant" or
"promotion" unless it ends the game, in which case the terminal kind wins ("checkmate", "stalemate",
"insufficient", "seventyfive_moves"); every other move is "illegal", with a kind (ILLEGAL_KINDS).
"""

from __future__ import annotations

import random
from typing import Iterator

import chess

from rookworld.tasks.arbiter import MAX_HISTORY

TERMINAL_CASES = ("checkmate", "stalemate", "insufficient", "seventyfive_moves")
SPECIAL_CASES = ("castling", "en_passant", "promotion")
CASES = ("normal", "illegal", *TERMINAL_CASES, *SPECIAL_CASES)
RARE_CASES = ("checkmate", "stalemate", "insufficient", *SPECIAL_CASES)  # what rare_moves finds
ILLEGAL_KINDS = ("pinned_piece", "king_into_check", "ignores_check", "wrong_side", "own_piece_on_target",
                 "empty_from_square", "impossible_geometry", "missing_promotion")
SEVENTYFIVE_CLOCK = 149  # one quiet move from the 75-move rule
ENDING_MAX_PIECES = 12   # rare_moves looks for game ends only in positions with at most this many pieces


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


def move_kind(board: chess.Board, move: chess.Move) -> str:
    """The kind of a legal move, before any game end: castling, en_passant, promotion or normal."""
    if board.is_castling(move):
        return "castling"
    if board.is_en_passant(move):
        return "en_passant"
    return "promotion" if move.promotion else "normal"


def legal_move_case(board: chess.Board, move: chess.Move) -> str:
    """Case label of a legal move; terminal outcomes take precedence over move kinds."""
    kind = move_kind(board, move)
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


def legal_move_case_in(board: chess.Board, move: chess.Move, insufficient_now: bool) -> str:
    """legal_move_case with one legal-move probe per move (~2x cheaper), given whether the position
    has insufficient material now: a move that neither captures nor promotes keeps every piece and
    each bishop's square colour, so it keeps that verdict."""
    kind = move_kind(board, move)
    changes_material = move.promotion is not None or board.is_capture(move)
    board.push(move)
    try:
        if not any(board.generate_legal_moves()):
            return "checkmate" if board.is_check() else "stalemate"
        if board.is_insufficient_material() if changes_material else insufficient_now:
            return "insufficient"
        return "seventyfive_moves" if board.halfmove_clock >= 150 else kind
    finally:
        board.pop()


def move_case(fen: str, uci: str) -> str:
    """The case of the move `uci` in the position `fen`: "illegal" unless it is legal, else legal_move_case."""
    board = chess.Board(fen)
    try:
        move = chess.Move.from_uci(uci)
    except ValueError:
        return "illegal"
    return legal_move_case(board, move) if move in board.legal_moves else "illegal"


def illegal_moves(board: chess.Board, rng: random.Random,
                  legal: set[chess.Move] | None = None) -> list[tuple[chess.Move, str]]:
    """A sample of illegal moves of several kinds, each with its kind (`legal`: the board's legal
    moves when the caller has them already)."""
    us = board.turn
    legal = set(board.legal_moves) if legal is None else legal
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


def biased_random_move(board: chess.Board, rng: random.Random) -> chess.Move:
    """A random legal move, biased to captures, promotions and pawn moves so that endgames,
    promotions and en-passant chances come up often."""
    moves = list(board.legal_moves)
    forcing = [m for m in moves if board.is_capture(m) or m.promotion]
    pawn = [m for m in moves if board.piece_type_at(m.from_square) == chess.PAWN]
    pick = rng.random()
    pool = forcing if pick < 0.4 and forcing else pawn if pick < 0.7 and pawn else moves
    return rng.choice(pool)


def random_game_positions(rng: random.Random, n_games: int) -> Iterator[chess.Board]:
    """Positions of biased random-move games (biased_random_move), a third from random endgames."""
    for game in range(n_games):
        board = random_endgame_board(rng) if game % 3 == 0 else chess.Board()
        for _ in range(rng.randint(4, 200)):
            if board.is_game_over():
                break
            board.push(biased_random_move(board, rng))
            yield board


def recent_history(board: chess.Board, n: int = MAX_HISTORY) -> list[str]:
    return [move.uci() for move in board.move_stack[-n:]]


def with_seventyfive_clock(board: chess.Board) -> chess.Board:
    """Same position one quiet move away from the 75-move rule (a rare but real terminal)."""
    clocked = board.copy(stack=False)
    clocked.halfmove_clock = SEVENTYFIVE_CLOCK
    return clocked


def rare_moves(board: chess.Board) -> Iterator[tuple[str, chess.Move]]:
    """(case, move) for this position's legal moves whose case is one of RARE_CASES. Special moves
    come from python-chess's targeted generators; game ends are looked for only in positions of few
    pieces, where random play meets nearly all of them (checks for mate, captures for insufficient
    material, every move when the opponent has few pieces for stalemate). Far cheaper than
    classifying every legal move, which matters for the A: stream's start-up."""
    if chess.popcount(board.occupied) <= ENDING_MAX_PIECES:
        cramped = chess.popcount(board.occupied_co[not board.turn]) <= 3
        candidates = [m for m in board.legal_moves if cramped or m.promotion or board.is_castling(m)
                      or board.is_en_passant(m) or board.is_capture(m) or board.gives_check(m)]
    else:
        promoting = board.pawns & board.occupied_co[board.turn] & (chess.BB_RANK_7 if board.turn else chess.BB_RANK_2)
        candidates = [*board.generate_castling_moves(), *board.generate_legal_ep(),
                      *(board.generate_legal_moves(from_mask=promoting) if promoting else ())]
        candidates = [m for m in candidates if board.is_legal(m)]
    for move in candidates:
        case = legal_move_case(board, move)
        if case in RARE_CASES:
            yield case, move


def classify_position(board: chess.Board, rng: random.Random) -> dict[str, list[tuple[chess.Move, str]]]:
    """(move, detail) options per case reachable from this position; illegal moves are keyed
    "illegal:<kind>" so that every kind can get its share."""
    options: dict[str, list[tuple[chess.Move, str]]] = {}
    insufficient_now = board.is_insufficient_material()
    legal = list(board.legal_moves)
    for move in legal:
        options.setdefault(legal_move_case_in(board, move, insufficient_now), []).append((move, ""))
    for move, kind in illegal_moves(board, rng, set(legal)):
        options.setdefault(f"illegal:{kind}", []).append((move, kind))
    return options
