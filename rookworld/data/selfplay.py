"""Self-play games whose move choice reuses the label's own search.

Each position of a game is analysed once, at the label budget (MultiPV, one thread, cleared hash):
that analysis is the position's label and also the player's move choice (a softmax over the
candidates' evals, or now and then a uniformly random move). No second, shallower search picks the
moves, so every analysed position can be kept: one engine search per kept position.

A game is fixed by (seed, game index) alone, so any worker in any process plays it the same way,
and a run split over processes or resumed after a kill produces the same games.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

import chess

from rookworld.data.move_cases import random_endgame_board, recent_history
from rookworld.data.phase import game_phase
from rookworld.data.records import position_key
from rookworld.stockfish.engine import Engine
from rookworld.stockfish.uci_pipe import PipeEngine
from rookworld.tasks import Candidate

SPLITS_BY_GAME = ("validation", "test", "rl", "train")  # the order of the split fractions below


@dataclass(frozen=True)
class PlaySettings:
    """How self-play games are played (CLI flags of annotate, one per field)."""

    temperature: float = 0.5  # pawns: softmax over the MultiPV evals
    epsilon: float = 0.03  # chance of a uniformly random legal move
    max_plies: int = 160
    max_opening_random_plies: int = 6  # uniformly random plies before the first analysed one
    endgame_start_fraction: float = 0.2  # games that start from a random few-piece position
    resign_eval: float = 8.0  # pawns: a game this lopsided for resign_plies plies in a row ends
    resign_plies: int = 4


@dataclass(frozen=True)
class GameSettings(PlaySettings):
    """Play settings and which split a game goes to (--shards)."""

    validation_fraction: float = 0.0125  # of games: held out for validation (>= 10k positions of 1.15M)
    test_fraction: float = 0.0125  # of games: held out for the final test
    rl_fraction: float = 0.05  # of games: the RL split (never in supervised training)


def split_of_game(seed: int, game: int, settings: GameSettings) -> str:
    """validation | test | rl | train: whole games go to one split, by a draw of their own."""
    draw = random.Random(f"split:{seed}:{game}").random()
    bounds = (settings.validation_fraction, settings.test_fraction, settings.rl_fraction)
    for split, fraction in zip(SPLITS_BY_GAME, bounds):
        if draw < fraction:
            return split
        draw -= fraction
    return "train"


def sample_move(board: chess.Board, candidates: tuple[Candidate, ...], rng: random.Random,
                temperature: float, epsilon: float) -> chess.Move:
    """A uniformly random legal move with chance epsilon, else a softmax draw over the candidates."""
    if rng.random() < epsilon or not candidates:
        return rng.choice(list(board.legal_moves))
    top = max(c.eval for c in candidates)
    weights = [math.exp((c.eval - top) / temperature) for c in candidates]
    return chess.Move.from_uci(rng.choices(candidates, weights)[0].move)


class Repetitions:
    """Whether a position of a game has occurred twice (`any`): the positions are added once each."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.any = False

    def add(self, fen: str) -> None:
        key = position_key(fen)
        self.any = self.any or key in self.keys
        self.keys.add(key)


def is_over_or_drawn(board: chess.Board, any_repetition: bool) -> bool:
    """`board.is_game_over(claim_draw=True)`, cheaper: its threefold-repetition check (a push and a
    pop of every legal move, about 1 ms) can only succeed once some position of the game has occurred
    twice, so it runs only then."""
    if board.is_game_over() or board.can_claim_fifty_moves():
        return True
    return any_repetition and board.can_claim_threefold_repetition()


def play_game(engine: Engine | PipeEngine, seed: int, game: int, settings: GameSettings) -> list[dict]:
    """The labelled positions of one game, in play order: annotate's record schema plus the game index
    and its split. The engine's limit is the label budget."""
    rng = random.Random(f"game:{seed}:{game}")
    from_endgame = rng.random() < settings.endgame_start_fraction
    board = random_endgame_board(rng) if from_endgame else chess.Board()
    source = "selfplay-endgame" if from_endgame else "selfplay"
    repetitions = Repetitions()
    for _ in range(0 if from_endgame else rng.randint(0, settings.max_opening_random_plies)):
        if board.is_game_over():
            break
        repetitions.add(board.fen())
        board.push(rng.choice(list(board.legal_moves)))
    split, engine_name, limit = split_of_game(seed, game, settings), engine.name, engine.limit_record
    records, lopsided = [], 0
    for _ in range(settings.max_plies):
        fen = board.fen()
        repetitions.add(fen)
        if is_over_or_drawn(board, repetitions.any) or lopsided >= settings.resign_plies:
            break
        candidates = engine.analyse(fen)
        records.append({"fen": fen, "history": recent_history(board), "phase": game_phase(board),
                        "source": source, "candidates": [{"move": c.move, "eval": c.eval} for c in candidates],
                        "engine": engine_name, "limit": limit, "game": game, "split": split})
        lopsided = lopsided + 1 if abs(candidates[0].eval) >= settings.resign_eval else 0
        board.push(sample_move(board, candidates, rng, settings.temperature, settings.epsilon))
    return records
