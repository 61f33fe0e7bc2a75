"""conf/eval/: the held-out evaluation with greedy decoding, at step 0, every `every` steps and at the end."""
from __future__ import annotations

from dataclasses import dataclass

from rookworld import final_pool
from rookworld.data.arbiter_stream import check_case_shares
from rookworld.data.records import FINAL, HELD_OUT_SPLITS
from rookworld.specs.rules import ConfigError, one_of, require


SCORES = ("graduated", "chess")  # eval.score: the task-score formulas of rookworld/judge/evaluate.py
DRAWS = ("first", "blocks")  # the held-out problems evaluated: the first ones, or the run seed's block


@dataclass(frozen=True)
class Eval:
    split: str
    every: int
    num_policy: int
    num_arbiter: int
    draw: str
    arbiter_cases: dict[str, float] | None
    batch_size: int
    num_samples_logged: int
    cache_dir: str | None
    score: str

    def __post_init__(self):
        one_of("eval.split", self.split, (*HELD_OUT_SPLITS, FINAL))
        final_pool.refuse_split("eval.split", self.split)
        one_of("eval.draw", self.draw, DRAWS)
        one_of("eval.score", self.score, SCORES)
        require(self.draw == "first" or self.arbiter_cases is None, "eval.draw", self.draw,
                "blocks draws from the held-out mix: set eval.arbiter_cases=null")
        require(self.every >= 0, "eval.every", self.every, "must be >= 0 (0 = only at the start and the end)")
        if self.arbiter_cases is not None:
            try:
                check_case_shares(self.arbiter_cases, "eval.arbiter_cases")
            except ValueError as error:
                raise ConfigError(str(error)) from None
        require(self.batch_size >= 1, "eval.batch_size", self.batch_size, "must be >= 1")
        require(self.cache_dir is None or (isinstance(self.cache_dir, str) and self.cache_dir.strip() != ""),
                "eval.cache_dir", self.cache_dir, "must be a folder or null (no cache)")
