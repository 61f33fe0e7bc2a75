"""Reward functions: reward_fn(problem, completion) -> RewardResult(total, components).

Both rewards score the same per-task criteria, each in [0, 1] (docs/rewards.md):
  P/format         M:, E:, B: present, 1-5 UCI moves, one finite eval per move, one UCI best move
  P/legal_best     the B: move is legal in the position
  P/best_move      the B: move is the engine's rank-1 move (truth.best_move, never a dataset label)
  P/top5           |distinct first 5 proposed moves ∩ engine top 5| / |engine top 5|
  P/eval_accuracy  mean over proposed moves found in the engine top 5 of
                   max(0, 1 - |E - engine eval| / eval_scale); 0 if none found or E and M counts differ
  A/format         four "+" fields, a six-field FEN python-chess can set up, a task reward
                   (-1.0, 0.001, 0.5, 1.0), flags 0 or 1
  A/next_state     next FEN exact;  A/reward, A/terminated, A/truncated: each field exact
  <task>/malformed 1 when the completion does not parse (then every other component is 0)
GraduatedReward: total = malformed_penalty if malformed else sum(weight * component) (max 1.0).
ExactReward: total = 1.0 iff the whole answer is right, malformed_penalty if malformed, else 0.0.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

import chess

from rookworld.tasks.arbiter import (REWARD_DRAW, REWARD_ILLEGAL, REWARD_LEGAL, REWARD_WIN, ArbiterAnswer,
                                     ArbiterTruth, is_fen, parse_arbiter)
from rookworld.tasks.policy import MAX_CANDIDATES, PolicyAnswer, PolicyTruth, parse_policy
from rookworld.tasks.problem import Problem

POLICY_CRITERIA = ("format", "legal_best", "best_move", "top5", "eval_accuracy")
ARBITER_CRITERIA = ("format", "next_state", "reward", "terminated", "truncated")
CRITERIA = {"P": POLICY_CRITERIA, "A": ARBITER_CRITERIA}
TASK_REWARDS = (REWARD_ILLEGAL, REWARD_LEGAL, REWARD_DRAW, REWARD_WIN)
DEFAULT_EVAL_SCALE = 1.0
UCI_PATTERN = re.compile(r"[a-h][1-8][a-h][1-8][qrbn]?")


@dataclass(frozen=True)
class RewardResult:
    total: float
    components: dict[str, float]


# ---- per-task criteria -------------------------------------------------------------------------

def policy_scores(truth: PolicyTruth, answer: PolicyAnswer, eval_scale: float = DEFAULT_EVAL_SCALE) -> dict[str, float]:
    best = answer.best_move
    return {
        "format": float(_policy_well_formed(answer)),
        "legal_best": float(best is not None and best in _legal_moves(truth.fen)),
        "best_move": float(best == truth.best_move),
        "top5": _top5_overlap(truth, answer),
        "eval_accuracy": _eval_accuracy(truth, answer, eval_scale),
    }


def arbiter_scores(truth: ArbiterTruth, answer: ArbiterAnswer) -> dict[str, float]:
    return {
        "format": float(_arbiter_well_formed(answer)),
        "next_state": float(answer.next_fen == truth.next_fen),
        "reward": float(answer.reward == truth.reward),
        "terminated": float(answer.terminated == int(truth.terminated)),
        "truncated": float(answer.truncated == int(truth.truncated)),
    }


def parse_completion(problem: Problem, completion: str) -> PolicyAnswer | ArbiterAnswer | None:
    """The completion parsed by its task's parser, or None when it does not parse."""
    return parse_policy(completion) if problem.task == "P" else parse_arbiter(completion)


def score_answer(problem: Problem, answer: PolicyAnswer | ArbiterAnswer | None,
                 eval_scale: float = DEFAULT_EVAL_SCALE) -> dict[str, float] | None:
    """Unprefixed criteria of a parsed completion, or None when it did not parse."""
    if answer is None:
        return None
    if problem.task == "P":
        return policy_scores(problem.truth, answer, eval_scale)
    return arbiter_scores(problem.truth, answer)


def score_completion(problem: Problem, completion: str,
                     eval_scale: float = DEFAULT_EVAL_SCALE) -> dict[str, float] | None:
    """Unprefixed criteria of one completion, or None when it does not parse."""
    return score_answer(problem, parse_completion(problem, completion), eval_scale)


def _policy_well_formed(answer: PolicyAnswer) -> bool:
    return (1 <= len(answer.moves) <= MAX_CANDIDATES
            and all(UCI_PATTERN.fullmatch(move) for move in answer.moves)
            and len(answer.evals) == len(answer.moves)
            and answer.best_move is not None
            and UCI_PATTERN.fullmatch(answer.best_move) is not None)


def _arbiter_well_formed(answer: ArbiterAnswer) -> bool:
    return (answer.reward in TASK_REWARDS
            and answer.terminated is not None
            and answer.truncated is not None
            and is_fen(answer.next_fen))


@lru_cache(maxsize=8192)
def _legal_moves(fen: str) -> frozenset[str]:
    return frozenset(move.uci() for move in chess.Board(fen).legal_moves)


def _engine_top(truth: PolicyTruth) -> dict[str, float]:
    # Rounded like the written evals, so an exact copy of the truth scores full accuracy.
    return {c.move: round(c.eval, 2) for c in truth.candidates[:MAX_CANDIDATES]}


def _top5_overlap(truth: PolicyTruth, answer: PolicyAnswer) -> float:
    engine = _engine_top(truth)
    return len(set(answer.moves[:MAX_CANDIDATES]) & engine.keys()) / len(engine)


def _eval_accuracy(truth: PolicyTruth, answer: PolicyAnswer, eval_scale: float) -> float:
    if not answer.evals or len(answer.evals) != len(answer.moves):
        return 0.0
    engine = _engine_top(truth)
    accuracy: dict[str, float] = {}
    for move, value in zip(answer.moves[:MAX_CANDIDATES], answer.evals[:MAX_CANDIDATES]):
        if move in engine and move not in accuracy:
            accuracy[move] = max(0.0, 1.0 - abs(value - engine[move]) / eval_scale)
    return math.fsum(accuracy.values()) / len(accuracy) if accuracy else 0.0


def _components(task: str, scores: dict[str, float] | None) -> dict[str, float]:
    components = {f"{task}/malformed": float(scores is None)}
    for name in CRITERIA[task]:
        components[f"{task}/{name}"] = 0.0 if scores is None else scores[name]
    return components


# ---- rewards -----------------------------------------------------------------------------------

class GraduatedReward:
    """Partial credit: malformed_penalty when the completion does not parse, else the weighted sum
    of the task's criteria. Each task's weights are non-negative and sum to 1.0."""

    def __init__(self, malformed_penalty: float = -0.3, eval_scale: float = DEFAULT_EVAL_SCALE,
                 policy_format: float = 0.1, policy_legal_best: float = 0.1, policy_best_move: float = 0.4,
                 policy_top5: float = 0.2, policy_eval_accuracy: float = 0.2,
                 arbiter_format: float = 0.1, arbiter_next_state: float = 0.6, arbiter_reward: float = 0.1,
                 arbiter_terminated: float = 0.1, arbiter_truncated: float = 0.1) -> None:
        self.malformed_penalty = _check_penalty("GraduatedReward.malformed_penalty", malformed_penalty)
        self.eval_scale = _check_positive("GraduatedReward.eval_scale", eval_scale)
        self.weights = {
            "P": _check_weights("policy", dict(zip(POLICY_CRITERIA, (
                policy_format, policy_legal_best, policy_best_move, policy_top5, policy_eval_accuracy)))),
            "A": _check_weights("arbiter", dict(zip(ARBITER_CRITERIA, (
                arbiter_format, arbiter_next_state, arbiter_reward, arbiter_terminated, arbiter_truncated)))),
        }

    def __call__(self, problem: Problem, completion: str) -> RewardResult:
        scores = score_completion(problem, completion, self.eval_scale)
        components = _components(problem.task, scores)
        if scores is None:
            return RewardResult(self.malformed_penalty, components)
        weights = self.weights[problem.task]
        total = min(1.0, math.fsum(weights[name] * scores[name] for name in weights))
        return RewardResult(total, components)


class ExactReward:
    """All or nothing: 1.0 iff P: the B: move is legal and the engine's rank-1 move, A: all four
    fields are exact; malformed_penalty when the completion does not parse; else 0.0."""

    def __init__(self, malformed_penalty: float = 0.0) -> None:
        self.malformed_penalty = _check_penalty("ExactReward.malformed_penalty", malformed_penalty)

    def __call__(self, problem: Problem, completion: str) -> RewardResult:
        scores = score_completion(problem, completion)
        components = _components(problem.task, scores)
        if scores is None:
            return RewardResult(self.malformed_penalty, components)
        required = ("legal_best", "best_move") if problem.task == "P" else ARBITER_CRITERIA[1:]
        return RewardResult(float(all(scores[name] == 1.0 for name in required)), components)


# ---- validation --------------------------------------------------------------------------------

def _check_number(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}={value!r}: expected a finite number")
    return float(value)


def _check_penalty(name: str, value: float) -> float:
    value = _check_number(name, value)
    if not -1.0 <= value <= 0.0:
        raise ValueError(f"{name}={value}: expected a value in [-1.0, 0.0]")
    return value


def _check_positive(name: str, value: float) -> float:
    value = _check_number(name, value)
    if value <= 0.0:
        raise ValueError(f"{name}={value}: expected > 0")
    return value


def _check_weights(prefix: str, weights: dict[str, float]) -> dict[str, float]:
    checked = {}
    for criterion, value in weights.items():
        name = f"GraduatedReward.{prefix}_{criterion}"
        checked[criterion] = _check_number(name, value)
        if checked[criterion] < 0.0:
            raise ValueError(f"{name}={value}: weights must be >= 0")
    total = math.fsum(checked.values())
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        listed = ", ".join(f"{prefix}_{k}={v}" for k, v in checked.items())
        raise ValueError(f"GraduatedReward {prefix} weights sum to {total:g}, expected 1.0 ({listed})")
    return checked
