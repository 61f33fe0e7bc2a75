"""conf/sampling/: generation of the training completions (evaluation always decodes greedily)."""
from __future__ import annotations

from dataclasses import dataclass

from rookworld.specs.rules import require


@dataclass(frozen=True)
class Sampling:
    temperature: float
    top_k: int
    top_p: float
    max_new_tokens: dict[str, int]
    finish_check_every: int

    def __post_init__(self):
        require(self.temperature >= 0, "sampling.temperature", self.temperature, "must be >= 0 (0 = greedy)")
        require(self.top_k >= 0, "sampling.top_k", self.top_k, "must be >= 0 (0 = off)")
        require(0 < self.top_p <= 1, "sampling.top_p", self.top_p, "must be in (0, 1]")
        require(isinstance(self.finish_check_every, int) and self.finish_check_every >= 1,
                "sampling.finish_check_every", self.finish_check_every, "must be an integer >= 1")
        for task, cap in self.max_new_tokens.items():
            require(cap >= 1, f"sampling.max_new_tokens.{task}", cap, "must be >= 1")
