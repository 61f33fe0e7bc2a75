"""P: move values: a move's win probability from its engine value, its loss against the best move, the
criteria of reward=move_value and the held-out chess-skill scores (docs/rewards.md).

The values are PolicyTruth.action_values: every legal move with the engine's value of the position after
it, pawns from the mover's point of view, mate in n as +-(1000 - n/100) (the candidates' convention).
"""
from __future__ import annotations

import math
from functools import lru_cache

import chess

from rookworld.tasks.policy import MAX_CANDIDATES, PolicyAnswer, PolicyTruth, policy_well_formed

WIN_SLOPE = 0.00368208      # Lichess's logistic (lichess.org accuracy docs): win% = 50 + 50 (2 / (1 + e^(-k cp)) - 1)
CP_CLIP = 1000.0            # centipawns are clipped to +-1000 before the logistic (and in the centipawn loss)
MATE_THRESHOLD = 900.0      # pawns: |value| >= 900 is a mate (+-(1000 - n/100)): win probability 1 or 0
BLUNDER_LOSS = 0.30         # a loss of >= 0.30 win probability is a blunder (Lichess: >= 30 points)
ONLY_MOVE_MARGIN = 0.30     # an only-move position: the best move beats the second by >= 0.30 win probability
MOVE_VALUE_CRITERIA = ("format", "legal_best", "move_value", "candidates", "eval_accuracy")


class MissingActionValues(ValueError):
    """A P: position without action values where move values are needed (a one-line message)."""


def win_probability(pawns: float) -> float:
    """The side to move's win probability in [0, 1] from an engine value in pawns (Lichess's logistic on
    centipawns clipped to +-1000; a mate for the mover is 1, against it 0)."""
    if pawns >= MATE_THRESHOLD:
        return 1.0
    if pawns <= -MATE_THRESHOLD:
        return 0.0
    return 1.0 / (1.0 + math.exp(-WIN_SLOPE * centipawns(pawns)))  # = (50 + 50 (2 / (1 + e^-kx) - 1)) / 100


def centipawns(pawns: float) -> float:
    """Centipawns clipped to +-CP_CLIP; a mate is +-CP_CLIP."""
    return max(-CP_CLIP, min(CP_CLIP, 100.0 * pawns))


def require_action_values(truth: PolicyTruth) -> dict[str, float]:
    if truth.action_values is None:
        raise MissingActionValues(f"the P: position {truth.fen!r} has no action_values (the engine value of every "
                                  "legal move: docs/rewards.md); annotate its data file with them")
    return truth.move_values


def move_losses(truth: PolicyTruth) -> dict[str, float]:
    """Each legal move's win-probability loss against the best one (>= 0; 0 for the best and its ties)."""
    values = require_action_values(truth)
    best = max(win_probability(v) for v in values.values())
    return {move: best - win_probability(value) for move, value in values.items()}


# ---- reward=move_value criteria ---------------------------------------------------------------

def move_value_scores(truth: PolicyTruth, answer: PolicyAnswer, eval_scale: float, loss_scale: float) -> dict[str, float]:
    """The criteria of reward=move_value, each in [0, 1] (docs/rewards.md):
    move_value: exp(-loss(B) / loss_scale) for a legal B: move, else 0;
    candidates: sum of the distinct legal listed moves' exp(-loss / loss_scale) over that sum of the k best
      moves (k = min(5, legal moves)), times k / max(k, listed moves): 1 only for a k best moves' list;
    eval_accuracy: mean over the listed moves of max(0, 1 - |E - value| / eval_scale), 0 for a duplicate or
      an illegal move."""
    losses = move_losses(truth)
    quality = {move: math.exp(-loss / loss_scale) for move, loss in losses.items()}
    best = answer.best_move
    return {
        "format": float(policy_well_formed(answer)),
        "legal_best": float(best in losses),
        "move_value": quality.get(best, 0.0),
        "candidates": _candidates(quality, answer.moves),
        "eval_accuracy": _value_accuracy(truth.move_values, answer, eval_scale),
    }


def _candidates(quality: dict[str, float], moves: list[str]) -> float:
    k = min(MAX_CANDIDATES, len(quality))
    found = math.fsum(quality[m] for m in set(moves[:MAX_CANDIDATES]) if m in quality)
    ideal = math.fsum(sorted(quality.values(), reverse=True)[:k])
    return found / ideal * k / max(k, len(moves))


def _value_accuracy(values: dict[str, float], answer: PolicyAnswer, eval_scale: float) -> float:
    if not answer.evals or len(answer.evals) != len(answer.moves):
        return 0.0
    proposed = list(zip(answer.moves[:MAX_CANDIDATES], answer.evals[:MAX_CANDIDATES]))
    accuracy: dict[str, float] = {}
    for move, value in proposed:
        if move in values and move not in accuracy:  # rounded like the written evals: a copy scores 1
            accuracy[move] = max(0.0, 1.0 - abs(value - round(values[move], 2)) / eval_scale)
    return math.fsum(accuracy.values()) / len(proposed)


# ---- held-out chess skill ---------------------------------------------------------------------

@lru_cache(maxsize=8192)
def mating_moves(fen: str) -> frozenset[str]:
    """The legal moves that checkmate at once (python-chess; no engine needed)."""
    board = chess.Board(fen)
    mates = set()
    for move in board.legal_moves:
        board.push(move)
        if board.is_checkmate():
            mates.add(move.uci())
        board.pop()
    return frozenset(mates)


def skill_scores(truth: PolicyTruth, answer: PolicyAnswer | None) -> dict[str, float]:
    """One held-out P: answer's chess-skill scores (docs/rewards.md), each present only where it applies:
    mate_in_one (positions with a mate in one: the B: move mates); with action values: win_prob_loss,
    cp_loss, blunder and, in only-move positions, only_move (the B: move is the best one). A missing,
    unparsable or illegal B: move loses the game: win probability 0, value -1000 centipawns."""
    best = answer.best_move if answer is not None else None
    scores = {}
    mates = mating_moves(truth.fen)
    if mates:
        scores["mate_in_one"] = float(best in mates)
    if truth.action_values is None:
        return scores
    values = truth.move_values
    best_value = max(values.values())
    lost = best not in values
    loss = win_probability(best_value) - (0.0 if lost else win_probability(values[best]))
    scores.update(win_prob_loss=loss, blunder=float(loss >= BLUNDER_LOSS),
                  cp_loss=centipawns(best_value) - (-CP_CLIP if lost else centipawns(values[best])))
    ranked = sorted((win_probability(v) for v in values.values()), reverse=True)
    if len(ranked) >= 2 and ranked[0] - ranked[1] >= ONLY_MOVE_MARGIN:
        scores["only_move"] = float(not lost and win_probability(values[best]) == ranked[0])
    return scores

