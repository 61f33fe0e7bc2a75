"""P: task (policy / analysis): prompt, ground truth, perfect completion, parser.

Document: "P: " + FEN.ljust(90) + "M: " + moves.ljust(30) + "E: " + evals.ljust(40) + "B: " + best
(docs/tasks.md). The prompt is "P: " + FEN; the completion is the rest of the document,
starting with the padding spaces, without the trailing newline (the loop appends the stop token).
"""
from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import ClassVar

import chess

from rookworld.tasks.problem import Problem

FEN_WIDTH = 90
MOVES_WIDTH = 30
EVALS_WIDTH = 40
MAX_CANDIDATES = 5
POLICY_CRITERIA = ("format", "legal_best", "best_move", "top5", "eval_accuracy")
EXACT_CRITERIA = ("legal_best", "best_move")  # ExactReward: 1.0 iff all of these are 1.0
DEFAULT_EVAL_SCALE = 1.0
UCI_PATTERN = re.compile(r"[a-h][1-8][a-h][1-8][qrbn]?")
EVAL_CLIP_PAWNS = 10.0


@dataclass(frozen=True)
class Candidate:
    move: str    # UCI
    eval: float  # pawns, side-to-move point of view


@dataclass(frozen=True)
class PolicyTruth:
    """Engine analysis of one position: candidates ranked best first for the side to move; optionally
    the engine value of every legal move (action_values, docs/rewards.md: the move-value data)."""
    task: ClassVar[str] = "P"
    fen: str
    candidates: tuple[Candidate, ...]
    action_values: tuple[Candidate, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", tuple(self.candidates))
        if not self.candidates:
            raise ValueError(f"PolicyTruth for {self.fen!r} has no candidates")
        if self.action_values is not None:
            object.__setattr__(self, "action_values", tuple(self.action_values))
            _check_action_value_entries(self.fen, self.action_values)

    @cached_property
    def move_values(self) -> dict[str, float]:
        """{move: engine value} of every legal move (pawns, side to move); empty without action values.
        That the moves are exactly the legal ones is checked here, on first use, not when the truth is
        made: it needs the position's legal moves, and a run uses a fraction of a large training split."""
        if self.action_values is None:
            return {}
        _check_action_values_are_the_legal_moves(self.fen, self.action_values)
        return {c.move: c.eval for c in self.action_values}

    @property
    def best_move(self) -> str:
        return self.candidates[0].move

    @property
    def best_moves(self) -> frozenset[str]:
        """Every candidate whose eval, as written (2 decimals), ties the rank-1 eval: each is credited
        as the best move (the engine's order among equal evals is arbitrary)."""
        top = round(self.candidates[0].eval, 2)
        return frozenset(c.move for c in self.candidates[:MAX_CANDIDATES] if round(c.eval, 2) == top)


@dataclass(frozen=True)
class PolicyAnswer:
    """A parsed completion. evals is empty when the E: field is empty or any value in it is not a
    finite float; best_move is None unless the B: field is exactly one token."""
    moves: list[str]
    evals: list[float]
    best_move: str | None


def _check_action_value_entries(fen: str, values: tuple[Candidate, ...]) -> None:
    """No move twice, each value finite: a one-line ValueError otherwise."""
    moves = [c.move for c in values]
    if len(set(moves)) != len(moves):
        raise ValueError(f"action_values of {fen!r} list a move more than once ({len(moves) - len(set(moves))} repeated)")
    bad = [c for c in values if not math.isfinite(c.eval)]
    if bad:
        raise ValueError(f"action_values of {fen!r}: {bad[0].move} has the value {bad[0].eval!r}, expected a finite number")


def _check_action_values_are_the_legal_moves(fen: str, values: tuple[Candidate, ...]) -> None:
    moves, legal = {c.move for c in values}, legal_moves(fen)
    if moves != legal:
        raise ValueError(f"action_values of {fen!r} must list every legal move "
                         f"(missing {sorted(legal - moves)}, not legal {sorted(moves - legal)})")


def policy_prompt(fen: str) -> str:
    return "P: " + fen


def policy_problem(truth: PolicyTruth) -> Problem:
    return Problem(task="P", prompt_text=policy_prompt(truth.fen), truth=truth)


def format_eval(pawns: float) -> str:
    """Python float text rounded to 2 decimals, as in the published data (-2.07, -2.0, 999.85)."""
    return str(round(float(pawns), 2))


def render_policy_completion(truth: PolicyTruth, shuffle_rng: random.Random | None = None) -> str:
    """The ideal continuation of policy_prompt(truth.fen). B is always the engine's rank-1 move;
    with shuffle_rng the candidates (moves with their evals) are listed in shuffled order."""
    candidates = list(truth.candidates[:MAX_CANDIDATES])
    if shuffle_rng is not None:
        shuffle_rng.shuffle(candidates)
    moves = " ".join(c.move for c in candidates)
    evals = " ".join(format_eval(c.eval) for c in candidates)
    padding = " " * max(0, FEN_WIDTH - len(truth.fen))
    return padding + "M: " + moves.ljust(MOVES_WIDTH) + "E: " + evals.ljust(EVALS_WIDTH) + "B: " + truth.best_move


def parse_policy(text: str) -> PolicyAnswer | None:
    """Fields by the first "M:", the first "E:" after it and the first "B:" after that, with any
    whitespace; text before "M:" is ignored (so a full document row parses too). None when a
    label is missing. Never raises."""
    fields = _split_fields(text)
    if fields is None:
        return None
    moves_text, evals_text, best_text = fields
    best_tokens = best_text.split()
    return PolicyAnswer(
        moves=moves_text.split(),
        evals=_parse_evals(evals_text),
        best_move=best_tokens[0] if len(best_tokens) == 1 else None,
    )


def _split_fields(text: str) -> tuple[str, str, str] | None:
    m_at = text.find("M:")
    e_at = text.find("E:", m_at + 2) if m_at >= 0 else -1
    b_at = text.find("B:", e_at + 2) if e_at >= 0 else -1
    if b_at < 0:
        return None
    return text[m_at + 2:e_at], text[e_at + 2:b_at], text[b_at + 2:]


def _parse_evals(evals_text: str) -> list[float]:
    values = []
    for token in evals_text.split():
        try:
            value = float(token)
        except ValueError:
            return []
        if not math.isfinite(value):
            return []
        values.append(value)
    return values


# ---- reward criteria (docs/rewards.md) --------------------------------------------------------

def policy_scores(truth: PolicyTruth, answer: PolicyAnswer, eval_scale: float = DEFAULT_EVAL_SCALE) -> dict[str, float]:
    best = answer.best_move
    return {
        "format": float(policy_well_formed(answer)),
        "legal_best": float(best is not None and best in legal_moves(truth.fen)),
        "best_move": float(best in truth.best_moves),
        "top5": _top5_overlap(truth, answer),
        "eval_accuracy": _eval_accuracy(truth, answer, eval_scale),
    }


CONSISTENCY_CHECKS = ("best_in_moves", "moves_legal", "best_top_eval")


def policy_consistency(truth: PolicyTruth, answer: PolicyAnswer | None) -> dict[str, float]:
    """Does the answer agree with itself (whatever the engine says)? best_in_moves: the B: move is one
    of the M: moves; moves_legal: every M: move is legal; best_top_eval: the B: move's E: value is the
    highest E: value (M: and E: of equal length). 0 for all when the completion does not parse."""
    if answer is None:
        return dict.fromkeys(CONSISTENCY_CHECKS, 0.0)
    moves, evals, best = answer.moves, answer.evals, answer.best_move
    in_moves = best is not None and best in moves
    top_eval = in_moves and len(evals) == len(moves) and evals[moves.index(best)] == max(evals)
    return {"best_in_moves": float(in_moves),
            "moves_legal": float(bool(moves) and all(m in legal_moves(truth.fen) for m in moves)),
            "best_top_eval": float(top_eval)}


def policy_well_formed(answer: PolicyAnswer) -> bool:
    return (1 <= len(answer.moves) <= MAX_CANDIDATES
            and all(UCI_PATTERN.fullmatch(move) for move in answer.moves)
            and len(answer.evals) == len(answer.moves)
            and answer.best_move is not None
            and UCI_PATTERN.fullmatch(answer.best_move) is not None)


@lru_cache(maxsize=8192)
def legal_moves(fen: str) -> frozenset[str]:
    return frozenset(move.uci() for move in chess.Board(fen).legal_moves)


def _engine_top(truth: PolicyTruth) -> dict[str, float]:
    # Rounded like the written evals, so an exact copy of the truth scores full accuracy.
    return {c.move: round(c.eval, 2) for c in truth.candidates[:MAX_CANDIDATES]}


def _top5_overlap(truth: PolicyTruth, answer: PolicyAnswer) -> float:
    """Engine candidates found / max(engine candidates, proposed moves): every proposed move that is
    not a new engine candidate (a duplicate, an illegal or a weaker move) costs, as does a list longer
    than the engine's (which is shorter than 5 only when fewer moves are legal)."""
    engine = _engine_top(truth)
    proposed = answer.moves[:MAX_CANDIDATES]
    return len(set(proposed) & engine.keys()) / max(len(engine), len(proposed))


def _eval_accuracy(truth: PolicyTruth, answer: PolicyAnswer, eval_scale: float) -> float:
    """Mean over the proposed moves of their eval accuracy; a move that is not a new engine candidate
    (a duplicate, an illegal or a weaker move) scores 0, so made-up evals never pay."""
    if not answer.evals or len(answer.evals) != len(answer.moves):
        return 0.0
    engine = _engine_top(truth)
    accuracy: dict[str, float] = {}
    proposed = list(zip(answer.moves[:MAX_CANDIDATES], answer.evals[:MAX_CANDIDATES]))
    for move, value in proposed:
        if move in engine and move not in accuracy:
            accuracy[move] = max(0.0, 1.0 - abs(value - engine[move]) / eval_scale)
    return math.fsum(accuracy.values()) / len(proposed)


# ---- held-out evaluation -----------------------------------------------------------------------

def eval_mae(truth: PolicyTruth, answer: PolicyAnswer | None) -> float | None:
    """Mean |E - engine eval| (clipped) over the answer's distinct moves among the engine's candidates,
    each with its first E: value: a repeated move counts once."""
    if answer is None or len(answer.evals) != len(answer.moves):
        return None
    engine = {c.move: c.eval for c in truth.candidates}
    first = dict(reversed(list(zip(answer.moves, answer.evals))))
    errors = [abs(_clip(e) - _clip(engine[m])) for m, e in first.items() if m in engine]
    return sum(errors) / len(errors) if errors else None


def _clip(pawns: float) -> float:
    return max(-EVAL_CLIP_PAWNS, min(EVAL_CLIP_PAWNS, pawns))
