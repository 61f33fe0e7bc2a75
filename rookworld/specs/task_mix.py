"""conf/task_mix/: the share of each task among the prompts of a step (P: policy, A: environment)."""
from __future__ import annotations

from dataclasses import dataclass

from rookworld.specs.rules import is_number, require


@dataclass(frozen=True)
class TaskMix:
    P: float
    A: float

    def __post_init__(self):
        for task in ("P", "A"):
            share = getattr(self, task)
            require(is_number(share) and share >= 0, f"task_mix.{task}", share, "must be a number >= 0")
        total = self.P + self.A
        require(abs(total - 1.0) < 1e-6, "task_mix", {"P": self.P, "A": self.A},
                f"shares sum to {total:g}, must sum to 1")

    def weights(self) -> dict[str, float]:
        return {"P": self.P, "A": self.A}
