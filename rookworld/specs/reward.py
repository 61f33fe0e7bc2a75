"""conf/reward/: how a completion is scored (docs/rewards.md), one spec per reward (reward=graduated|exact|move_value);
`build()` makes the scorer of rookworld/rewards.py."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from rookworld.rewards import ExactReward, GraduatedReward, MoveValueReward


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

    def build(self) -> GraduatedReward:
        return GraduatedReward(**asdict(self))


@dataclass(frozen=True)
class Exact:
    """All or nothing."""
    malformed_penalty: float

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

    def build(self) -> MoveValueReward:
        return MoveValueReward(**asdict(self))


Reward = Graduated | Exact | MoveValue
