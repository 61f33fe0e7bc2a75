"""Problem: the unit the training loop samples, one prompt with its ground truth."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from rookworld.tasks.arbiter import ArbiterTruth
    from rookworld.tasks.policy import PolicyTruth

TASKS = ("P", "A")


@dataclass(frozen=True)
class Problem:
    """task "P" carries a PolicyTruth, task "A" an ArbiterTruth; prompt_text has no padding."""
    task: Literal["P", "A"]
    prompt_text: str
    truth: PolicyTruth | ArbiterTruth
    game: int | None = None  # the self-play game a held-out position comes from (its record's "game"), if known

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"Problem.task={self.task!r}: expected 'P' or 'A'")
        # Each truth class names its task (a class attribute), so this module imports neither task.
        if getattr(self.truth, "task", None) != self.task:
            raise ValueError(f"Problem.task={self.task!r} needs a {self.task}: truth, "
                             f"got {type(self.truth).__name__}")
        if not self.prompt_text.startswith(f"{self.task}: "):
            raise ValueError(f"Problem.prompt_text must start with '{self.task}: ', got {self.prompt_text[:20]!r}")
