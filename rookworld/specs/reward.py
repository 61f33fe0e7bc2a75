"""conf/reward/: how a completion is scored (docs/rewards.md), one spec per reward (reward=graduated|exact|move_value);
its settings checked here, `build()` makes the scorer of rookworld/judge/rewards.py; the properties say what a run needs."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from rookworld.judge.rewards import ExactReward, GraduatedReward, MoveValueReward
from rookworld.specs.rules import ConfigError, is_number, require


@dataclass(frozen=True)
class Graduated:
    """Partial credit: a weighted sum of criteria per task, each in [0, 1]."""
    malformed_penalty: float
    eval_scale: float
    policy_format: float
    policy_legal_best: float
    policy_best_move: float
    policy_top5: float
    policy_eval_accuracy: float
    arbiter_format: float
    arbiter_next_state: float
    arbiter_reward: float
    arbiter_terminated: float
    arbiter_truncated: float

    needs_action_values = False  # scored against the engine's top 5
    sums_criteria = True         # a weighted sum of criteria (grpo.reward_aggregation=normalize_then_sum)

    def __post_init__(self):
        require_penalty(self.malformed_penalty)
        require_positive("eval_scale", self.eval_scale)
        require_weights(self, "policy")
        require_weights(self, "arbiter")

    def build(self) -> GraduatedReward:
        return GraduatedReward(**asdict(self))


@dataclass(frozen=True)
class Exact:
    """All or nothing."""
    malformed_penalty: float

    needs_action_values = False
    sums_criteria = False

    def __post_init__(self):
        require_penalty(self.malformed_penalty)

    def build(self) -> ExactReward:
        return ExactReward(**asdict(self))


@dataclass(frozen=True)
class MoveValue:
    """P: from every legal move's engine value (win-probability loss against the best move); A: graduated."""
    malformed_penalty: float
    eval_scale: float
    loss_scale: float
    policy_format: float
    policy_legal_best: float
    policy_move_value: float
    policy_candidates: float
    policy_eval_accuracy: float
    arbiter_format: float
    arbiter_next_state: float
    arbiter_reward: float
    arbiter_terminated: float
    arbiter_truncated: float

    needs_action_values = True  # every P: position's legal moves with their engine values
    sums_criteria = True

    def __post_init__(self):
        require_penalty(self.malformed_penalty)
        require_positive("eval_scale", self.eval_scale)
        require_positive("loss_scale", self.loss_scale)
        require_weights(self, "policy")
        require_weights(self, "arbiter")

    def build(self) -> MoveValueReward:
        return MoveValueReward(**asdict(self))


Reward = Graduated | Exact | MoveValue


def require_penalty(value) -> None:
    require(is_number(value) and -1.0 <= value <= 0.0, "reward.malformed_penalty", value, "must be in [-1, 0]")


def require_positive(key: str, value) -> None:
    require(is_number(value) and value > 0, f"reward.{key}", value, "must be a number > 0")


def require_weights(spec: Graduated | MoveValue, task: str) -> None:
    """The weights of `task` (its fields `<task>_*`): each a number >= 0, together 1.0 (a perfect answer scores 1)."""
    weights = {key: value for key, value in asdict(spec).items() if key.startswith(f"{task}_")}
    for key, value in weights.items():
        require(is_number(value) and value >= 0, f"reward.{key}", value, "a weight must be a number >= 0")
    total = math.fsum(weights.values())
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        listed = ", ".join(f"reward.{key}={value}" for key, value in weights.items())
        raise ConfigError(f"reward.{task}_*: the {task} weights sum to {total:g}, expected 1.0 ({listed})")
