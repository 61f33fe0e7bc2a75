"""Reward functions: reward_fn(problem, completion) -> RewardResult(total, components).

Both rewards score the same per-task criteria, each in [0, 1], defined next to each task's
format and parser in rookworld/tasks/ (docs/rewards.md):
  P/format         M:, E:, B: present, 1-5 UCI moves, one finite eval per move, one UCI best move
  P/legal_best     the B: move is legal in the position
  P/best_move      the B: move is the engine's rank-1 move, or ties its eval (truth.best_moves, never a
                   dataset label)
  P/top5           |distinct first 5 proposed moves ∩ engine top 5| / max(|engine top 5|, |proposed|)
  P/eval_accuracy  mean over ALL proposed moves (0 for a duplicate or a non-candidate) of
                   max(0, 1 - |E - engine eval| / eval_scale); 0 if none found or E and M counts differ
  A/format         four "+" fields, a six-field FEN python-chess can set up, a task reward
                   (-1.0, 0.001, 0.5, 1.0), flags 0 or 1
  A/next_state     next FEN exact;  A/reward, A/terminated, A/truncated: each field exact
  <task>/malformed 1 when the completion does not parse (then every other component is 0)
GraduatedReward: total = malformed_penalty if malformed else sum(weight * component) (max 1.0).
ExactReward: total = 1.0 iff the whole answer is right, malformed_penalty if malformed, else 0.0.
MoveValueReward: P: from the engine value of every legal move (rookworld/tasks/move_values.py):
  P/move_value     exp(-loss / loss_scale) of a legal B: move, loss = its win-probability loss to the best move
  P/candidates     the listed moves' exp(-loss / loss_scale) against the k best moves', padding costs
  P/eval_accuracy  as above, each listed move's E: against its own engine value
  total = malformed_penalty if malformed else the weighted sum; A: exactly GraduatedReward's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from rookworld.tasks import (ARBITER_CRITERIA, CRITERIA, DEFAULT_EVAL_SCALE,  # noqa: F401
                             MOVE_VALUE_CRITERIA, is_exact, POLICY_CRITERIA, Problem, move_value_scores, parse_policy,
                             require_action_values, score_completion)  # CRITERIA: re-exported for callers


@dataclass(frozen=True)
class RewardResult:
    total: float
    components: dict[str, float]


def _components(task: str, scores: dict[str, float] | None, criteria: tuple[str, ...] | None = None) -> dict[str, float]:
    components = {f"{task}/malformed": float(scores is None)}
    for name in criteria or CRITERIA[task]:
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
        self.malformed_penalty, self.eval_scale = float(malformed_penalty), float(eval_scale)
        self.weights = {
            "P": dict(zip(POLICY_CRITERIA, map(float, (
                policy_format, policy_legal_best, policy_best_move, policy_top5, policy_eval_accuracy)))),
            "A": dict(zip(ARBITER_CRITERIA, map(float, (
                arbiter_format, arbiter_next_state, arbiter_reward, arbiter_terminated, arbiter_truncated)))),
        }

    def criterion_weights(self) -> tuple[list[str], list[float]]:
        """The components a total is the weighted sum of (`<task>/<criterion>`, `<task>/malformed`) and
        their weights (the malformed indicator weighs the malformed penalty): for per-criterion
        normalisation (grpo.reward_aggregation=normalize_then_sum)."""
        names, weights = [], []
        for task, task_weights in self.weights.items():
            for name, weight in {**task_weights, "malformed": self.malformed_penalty}.items():
                names.append(f"{task}/{name}")
                weights.append(weight)
        return names, weights

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
        self.malformed_penalty = float(malformed_penalty)

    def __call__(self, problem: Problem, completion: str) -> RewardResult:
        scores = score_completion(problem, completion)
        components = _components(problem.task, scores)
        if scores is None:
            return RewardResult(self.malformed_penalty, components)
        return RewardResult(float(is_exact(problem.task, scores)), components)


class MoveValueReward:
    """P: partial credit from the engine value of every legal move (the problem's action values; a
    position without them is a MissingActionValues error): the weighted sum of format, legal_best,
    move_value, candidates and eval_accuracy, each in [0, 1], weights summing to 1.0; malformed_penalty
    when the completion does not parse. A: GraduatedReward's criteria and weights."""

    def __init__(self, malformed_penalty: float = -0.3, eval_scale: float = DEFAULT_EVAL_SCALE,
                 loss_scale: float = 0.2, policy_format: float = 0.1, policy_legal_best: float = 0.1,
                 policy_move_value: float = 0.5, policy_candidates: float = 0.15,
                 policy_eval_accuracy: float = 0.15, arbiter_format: float = 0.1, arbiter_next_state: float = 0.6,
                 arbiter_reward: float = 0.1, arbiter_terminated: float = 0.1, arbiter_truncated: float = 0.1) -> None:
        self.malformed_penalty, self.eval_scale, self.loss_scale = map(float, (malformed_penalty, eval_scale, loss_scale))
        self.policy_weights = dict(zip(MOVE_VALUE_CRITERIA, map(float, (
            policy_format, policy_legal_best, policy_move_value, policy_candidates, policy_eval_accuracy))))
        self.arbiter = GraduatedReward(malformed_penalty=malformed_penalty, arbiter_format=arbiter_format,
                                       arbiter_next_state=arbiter_next_state, arbiter_reward=arbiter_reward,
                                       arbiter_terminated=arbiter_terminated, arbiter_truncated=arbiter_truncated)

    def criterion_weights(self) -> tuple[list[str], list[float]]:
        """As GraduatedReward.criterion_weights, with the P: criteria of this reward."""
        names, weights = self.arbiter.criterion_weights()
        arbiter = [(n, w) for n, w in zip(names, weights) if n.startswith("A/")]
        policy = [(f"P/{n}", w) for n, w in {**self.policy_weights, "malformed": self.malformed_penalty}.items()]
        return [n for n, _ in policy + arbiter], [w for _, w in policy + arbiter]

    def __call__(self, problem: Problem, completion: str) -> RewardResult:
        if problem.task != "P":
            return self.arbiter(problem, completion)
        require_action_values(problem.truth)  # a position without values fails whatever the completion
        answer = parse_policy(completion)
        if answer is None:
            return RewardResult(self.malformed_penalty, _components("P", None, MOVE_VALUE_CRITERIA))
        scores = move_value_scores(problem.truth, answer, self.eval_scale, self.loss_scale)
        components = _components("P", scores, MOVE_VALUE_CRITERIA)
        total = min(1.0, math.fsum(self.policy_weights[name] * scores[name] for name in self.policy_weights))
        return RewardResult(total, components)

