"""The texts and rewards of one step's rows, each row scored as soon as its completion is final.

`StepScores.add` is the decoder's `on_finished` hook: on CUDA the decoder hands over the rows that
have stopped at each of its all-finished checks, and they are decoded and scored on the host while
the GPU generates the rest. `finish` decodes and scores the rows left once generation returns. The
result is the same whichever way a row is scored: a reward depends only on its problem and text.
"""
from __future__ import annotations

import torch

from rookworld.rewards import RewardResult
from rookworld.rollout import Rollout, completion_text, decode_completions
from rookworld.tasks import Problem


class StepScores:
    def __init__(self, tokenizer, reward_fn, problems: list[Problem]):
        self.tokenizer, self.reward_fn, self.problems = tokenizer, reward_fn, problems
        self.texts: dict[int, str] = {}
        self.results: dict[int, RewardResult] = {}

    def add(self, rows: list[int], completions: list[list[int]]) -> None:
        """Decode and score `rows` (their completions' token ids, stop token included)."""
        for row, ids in zip(rows, completions):
            self.texts[row] = completion_text(self.tokenizer, ids)
            self._score(row)

    def decode_rest(self, rollout: Rollout) -> None:
        """Texts of the rows not reported during generation (one host transfer)."""
        missing = [row for row in range(len(self.problems)) if row not in self.texts]
        if missing:
            self.texts.update(zip(missing, decode_completions(self.tokenizer, rollout, missing)))

    def finish(self) -> tuple[torch.Tensor, list[RewardResult]]:
        """Every row's reward total [B] (float32) and RewardResult; scores the rows not scored yet."""
        for row in range(len(self.problems)):
            if row not in self.results:
                self._score(row)
        scored = [self.results[row] for row in range(len(self.problems))]
        return torch.tensor([s.total for s in scored], dtype=torch.float32), scored

    def _score(self, row: int) -> None:
        self.results[row] = self.reward_fn(self.problems[row], self.texts[row])
