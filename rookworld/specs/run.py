"""RunSpec: one GRPO run (conf/config.yaml with its groups), the groups' specs plus the top-level knobs.
Rules that need several groups sit in RunSpec.__post_init__; each group checks its own keys."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rookworld.data.positions import has_final_pool
from rookworld.data.records import FINAL
from rookworld.specs.data import Data
from rookworld.specs.difficulty import Difficulty
from rookworld.specs.eval import Eval
from rookworld.specs.grpo import GRPO
from rookworld.specs.guards import Guards
from rookworld.specs.kl import KL
from rookworld.specs.model import Model
from rookworld.specs.optimizer import Optimizer
from rookworld.specs.reward import Reward
from rookworld.specs.rules import is_device, require, require_available, require_bool, resolve_device
from rookworld.specs.sampling import Sampling
from rookworld.specs.task_mix import TaskMix
from rookworld.specs.tracking import Tracking


WEIGHT_DTYPES = (None, "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Checkpoint:
    every: int
    save_final: bool
    weights_only: bool
    weights_dtype: str | None
    max_shard_mib: float | None
    dir: str

    def __post_init__(self):
        require(self.every >= 0, "checkpoint.every", self.every, "must be >= 0 (0 = off)")
        require_bool(self.weights_only, "checkpoint.weights_only")
        require(self.weights_dtype in WEIGHT_DTYPES, "checkpoint.weights_dtype", self.weights_dtype,
                f"expected one of {', '.join(map(str, WEIGHT_DTYPES))}")
        require(self.max_shard_mib is None or (isinstance(self.max_shard_mib, (int, float)) and self.max_shard_mib > 0),
                "checkpoint.max_shard_mib", self.max_shard_mib, "must be > 0 or null (one file)")
        for key in ("weights_dtype", "max_shard_mib"):
            require(self.weights_only or getattr(self, key) is None, f"checkpoint.{key}", getattr(self, key),
                    "shapes a weights-only save: set checkpoint.weights_only=true")


@dataclass(frozen=True)
class ResumeCheck:
    may_change: tuple[str, ...]
    accept_changes: bool

    def __post_init__(self):
        require(isinstance(self.may_change, tuple) and all(isinstance(p, str) and p for p in self.may_change),
                "resume_check.may_change", self.may_change, "must be a list of key patterns")
        require_bool(self.accept_changes, "resume_check.accept_changes")


@dataclass(frozen=True)
class Objective:
    metric: str
    failure_penalty: float

    def __post_init__(self):
        require(isinstance(self.metric, str) and self.metric.startswith("eval/"), "objective.metric", self.metric,
                "must name an evaluation metric (eval/score, eval/P/score, ...)")


@dataclass(frozen=True)
class RunSpec:
    seed: int
    device: str
    cpu_threads: int | None
    steps: int
    stop_at: int | None
    time_limit_min: float | None
    prompts_per_step: int
    log_every: int
    checkpoint: Checkpoint
    resume_from: str | None
    resume_check: ResumeCheck
    objective: Objective
    model: Model
    grpo: GRPO
    sampling: Sampling
    reward: Reward
    kl: KL
    optimizer: Optimizer
    task_mix: TaskMix
    data: Data
    difficulty: Difficulty
    eval: Eval
    guards: Guards
    tracking: Tracking
    trial: dict[str, Any]  # the sweep's (conf/trial/): read by rookworld/sweep/ only
    # The resolved config as plain data (no hydra node): what a checkpoint's config.yaml stores, what a
    # resume compares and what keys the step-0 evaluation cache. Not a knob.
    resolved: dict[str, Any] = field(repr=False, compare=False)

    def __post_init__(self):
        require(self.steps >= 0, "steps", self.steps, "must be >= 0")
        require(self.cpu_threads is None or self.cpu_threads >= 1, "cpu_threads", self.cpu_threads,
                "must be >= 1 or null (torch's choice)")
        require(self.stop_at is None or 1 <= self.stop_at <= self.steps, "stop_at", self.stop_at,
                f"must be null or between 1 and steps = {self.steps} (a prefix of the run)")
        require(self.prompts_per_step >= 1, "prompts_per_step", self.prompts_per_step, "must be >= 1")
        require(self.log_every >= 1, "log_every", self.log_every, "must be >= 1")
        require(self.time_limit_min is None or self.time_limit_min > 0, "time_limit_min", self.time_limit_min,
                "must be > 0 or null (no limit)")
        batch = self.prompts_per_step * self.grpo.group_size
        require(1 <= self.grpo.num_minibatches <= batch, "grpo.num_minibatches", self.grpo.num_minibatches,
                f"must be between 1 and prompts_per_step * group_size = {batch}")
        self._check_reward_aggregation()
        self._check_final_pool()
        check_device(self.device)
        if self.kl.ref_device != "same":
            require_available(self.kl.ref_device, "kl.ref_device", "same or cpu")

    @property
    def end_step(self) -> int:
        """The step this run ends at: `stop_at`, a prefix of the `steps` its schedules span, else `steps`."""
        return self.steps if self.stop_at is None else self.stop_at

    def _check_final_pool(self) -> None:
        """eval.split=final (accepted inside a staged sweep's confirmation alone: rookworld/final_pool.py) needs data
        that names a final pool."""
        if self.eval.split != FINAL:
            return
        require(has_final_pool(self.data.as_mapping()), "eval.split", FINAL,
                "this data has no final pool (data.policy_final / arbiter_final are null; data=selfplay has one)")

    def _check_reward_aggregation(self) -> None:
        aggregation = self.grpo.reward_aggregation
        if aggregation != "normalize_then_sum":
            return
        require(self.reward.sums_criteria, "grpo.reward_aggregation", aggregation,
                "needs reward=graduated or move_value (a weighted sum of criteria)")
        require(not self.grpo.reward_norm.enabled, "grpo.reward_aggregation", aggregation,
                "normalises the criteria itself: turn grpo.reward_norm.enabled off")
        require(self.kl.reward_estimator is None, "grpo.reward_aggregation", aggregation,
                "takes no KL in the reward: use kl.placement=loss")


def check_device(device: str, present: bool = True) -> None:
    """`device`: a valid name, and with `present` CUDA on this machine when it names cuda (a run fails
    here, before it opens)."""
    require(device == "auto" or is_device(device), "device", device, "expected auto, cpu, cuda or cuda:N")
    if present:
        resolve_device(device)
