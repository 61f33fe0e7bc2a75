"""A: task (environment / arbiter): prompt, ground truth from python-chess, perfect completion, parser.

Document: "A: " + FEN + "+" + move + "+" + recent moves + "+" + next FEN + "+" + reward + "+"
+ terminated + "+" + truncated (docs/tasks.md). The prompt ends after the third "+".
"""
from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import chess

from rookworld.tasks.problem import Problem

MAX_HISTORY = 10
REWARD_LEGAL = 0.001
REWARD_WIN = 1.0
REWARD_DRAW = 0.5
REWARD_ILLEGAL = -1.0
FEN_FIELDS = 6
TASK_REWARDS = (REWARD_ILLEGAL, REWARD_LEGAL, REWARD_DRAW, REWARD_WIN)
ARBITER_CRITERIA = ("format", "next_state", "reward", "terminated", "truncated")
EXACT_CRITERIA = ARBITER_CRITERIA[1:]  # ExactReward: 1.0 iff all of these are 1.0


@dataclass(frozen=True)
class ArbiterTruth:
    task: ClassVar[str] = "A"
    fen: str
    move: str
    history: tuple[str, ...]  # last <= 10 UCI moves, oldest first, ending with `move`
    next_fen: str
    reward: float
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class ArbiterAnswer:
    """A parsed completion; a field that does not parse is None (flags must be "0" or "1")."""
    next_fen: str
    reward: float | None
    terminated: int | None
    truncated: int | None


def arbiter_prompt(fen: str, move: str, history: tuple[str, ...] | list[str]) -> str:
    return "A: " + fen + "+" + move + "+" + " ".join(history) + "+"


def arbiter_truth(fen: str, move: str, history: tuple[str, ...] | list[str]) -> ArbiterTruth:
    """Ground truth from the FEN alone (no move stack, so repetition draws cannot be seen: the
    prompt does not carry enough history to detect them either)."""
    return _transition(chess.Board(fen), move, history)


def arbiter_problem(truth: ArbiterTruth) -> Problem:
    return Problem(task="A", prompt_text=arbiter_prompt(truth.fen, truth.move, truth.history), truth=truth)


def history_with_move(history: Sequence[str], move: str) -> list[str]:
    """The history an A: prompt carries: `history` (oldest first) + `move`, the last MAX_HISTORY kept."""
    return [*history, move][-MAX_HISTORY:]


def arbiter_problem_from_game(board_before: chess.Board, move: str) -> Problem:
    """A: problem for playing `move` in a game. History = the last 10 moves of the board's move
    stack including `move`. The truth uses the whole move stack, so a fivefold repetition ends the
    game here as it does in the real game."""
    past = [m.uci() for m in board_before.move_stack]
    return arbiter_problem(_transition(board_before.copy(), move, history_with_move(past, move)))


def _transition(board: chess.Board, move: str, history: tuple[str, ...] | list[str]) -> ArbiterTruth:
    """An illegal move leaves the position unchanged: next_fen is the input position (python-chess
    convention), reward -1.0, terminated 0, truncated 1."""
    history = tuple(history)
    _check_history(move, history)
    fen = board.fen()
    parsed = _parse_uci(move)
    if parsed is None or parsed not in board.legal_moves:
        return ArbiterTruth(fen, move, history, fen, REWARD_ILLEGAL, terminated=False, truncated=True)
    board.push(parsed)
    outcome = board.outcome()  # defaults: no claimable draws; includes 75-move and fivefold rules
    if outcome is None:
        reward = REWARD_LEGAL
    else:
        # A move can only checkmate the opponent, so any winner is the mover.
        reward = REWARD_DRAW if outcome.winner is None else REWARD_WIN
    return ArbiterTruth(fen, move, history, board.fen(), reward, terminated=outcome is not None, truncated=False)


def _check_history(move: str, history: tuple[str, ...]) -> None:
    if not history or history[-1] != move:
        raise ValueError(f"history {' '.join(history)!r} must end with the current move {move!r}")
    if len(history) > MAX_HISTORY:
        raise ValueError(f"history has {len(history)} moves; at most {MAX_HISTORY} allowed")


def _parse_uci(move: str) -> chess.Move | None:
    try:
        return chess.Move.from_uci(move)
    except ValueError:
        return None


TRANSITION_SLICES = ("ordinary", "capture_promotion", "castling_en_passant", "terminal", "illegal")


@functools.lru_cache(maxsize=8192)
def transition_slice(truth: ArbiterTruth) -> str:
    """The kind of transition, for per-slice accuracy: illegal (the move is not legal), terminal (the
    move ends the game or the episode), castling_en_passant, capture_promotion, else ordinary."""
    board, move = chess.Board(truth.fen), _parse_uci(truth.move)
    if move is None or move not in board.legal_moves:
        return "illegal"
    if truth.terminated or truth.truncated:
        return "terminal"
    if board.is_castling(move) or board.is_en_passant(move):
        return "castling_en_passant"
    if board.is_capture(move) or move.promotion:
        return "capture_promotion"
    return "ordinary"


def render_arbiter_completion(truth: ArbiterTruth) -> str:
    return "+".join((truth.next_fen, str(float(truth.reward)), str(int(truth.terminated)), str(int(truth.truncated))))


def parse_arbiter(text: str) -> ArbiterAnswer | None:
    """Split by "+" into exactly four whitespace-stripped fields, else None. Never raises."""
    fields = [field.strip() for field in text.split("+")]
    if len(fields) != 4:
        return None
    next_fen, reward, terminated, truncated = fields
    return ArbiterAnswer(next_fen, _parse_finite(reward), _parse_flag(terminated), _parse_flag(truncated))


@functools.lru_cache(maxsize=4096)  # the G completions of a group often predict the same FEN
def is_fen(text: str) -> bool:
    """Six FEN fields that python-chess can set up (the position need not be legal)."""
    if len(text.split()) != FEN_FIELDS:
        return False
    try:
        chess.Board(text)
    except ValueError:
        return False
    return True


def _parse_finite(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _parse_flag(text: str) -> int | None:
    return {"0": 0, "1": 1}.get(text)


# ---- reward criteria (docs/rewards.md) --------------------------------------------------------

def arbiter_scores(truth: ArbiterTruth, answer: ArbiterAnswer) -> dict[str, float]:
    return {
        "format": float(_arbiter_well_formed(answer)),
        "next_state": float(answer.next_fen == truth.next_fen),
        "reward": float(answer.reward == truth.reward),
        "terminated": float(answer.terminated == int(truth.terminated)),
        "truncated": float(answer.truncated == int(truth.truncated)),
    }


def _arbiter_well_formed(answer: ArbiterAnswer) -> bool:
    return (answer.reward in TASK_REWARDS
            and answer.terminated is not None
            and answer.truncated is not None
            and is_fen(answer.next_fen))
