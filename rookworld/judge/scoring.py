"""The texts and rewards of one step's rows, each row scored as soon as its completion is final.

`StepScores.add` is the decoder's `on_finished` hook: on CUDA the decoder hands over the rows that
have stopped at each of its all-finished checks, and they are decoded and scored on the host while
the GPU generates the rest. `finish` decodes and scores the rows left once generation returns. The
result is the same whichever way a row is scored: a reward depends only on its problem and text.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from rookworld.judge.rewards import RewardResult
from rookworld.judge.rollout import Rollout, completion_text, decode_completions
from rookworld.tasks import Problem, parse_completion, solves
from rookworld.tasks.dispatch import diagnostics


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

    def scored_rows(self) -> ScoredRows:
        """Every row with its reward, reward result and diagnostics (scores the rows not scored yet)."""
        rewards, results = self.finish()
        texts = [self.texts[row] for row in range(len(self.problems))]
        return ScoredRows(list(self.problems), rewards, results,
                          [row_diagnostics(p, text, r) for p, text, r in zip(self.problems, texts, results)], texts)

    def _score(self, row: int) -> None:
        self.results[row] = self.reward_fn(self.problems[row], self.texts[row])


def row_diagnostics(problem: Problem, text: str, result: RewardResult) -> dict[str, float]:
    """rookworld.tasks.dispatch.diagnostics of one scored row (P: parses the text again; A: reads the
    row's next_state criterion)."""
    if problem.task == "P":
        return diagnostics(problem, parse_completion(problem, text), None)
    return diagnostics(problem, None, {"next_state": result.components["A/next_state"]})


@dataclass
class ScoredRows:
    """Sampled rows with their rewards, reward results, diagnostics and completion texts, in row order."""
    problems: list[Problem]
    rewards: torch.Tensor                 # [B] float32 reward totals
    results: list[RewardResult]
    diagnostics: list[dict[str, float]]
    texts: list[str]

    def select(self, rows: list[int]) -> ScoredRows:
        return ScoredRows([self.problems[r] for r in rows], self.rewards[rows], [self.results[r] for r in rows],
                          [self.diagnostics[r] for r in rows], [self.texts[r] for r in rows])

    def __add__(self, other: ScoredRows) -> ScoredRows:
        return ScoredRows(self.problems + other.problems, torch.cat([self.rewards, other.rewards]),
                          self.results + other.results, self.diagnostics + other.diagnostics,
                          self.texts + other.texts)

    def solved(self) -> list[bool]:
        """Each row's completion is exact (rookworld.tasks.solves): what a pass rate counts."""
        return [solves(problem, text) for problem, text in zip(self.problems, self.texts)]

    def metrics(self) -> dict[str, float]:
        """reward, reward_std, reward/<task>, the mean of every reward component (reward/<task>/<name>)
        and of every diagnostic (reward/<task>/consistency/<check>, reward/A/next_state/<slice>)."""
        metrics = {"reward": self.rewards.mean().item(), "reward_std": self.rewards.std(unbiased=False).item()}
        values: dict[str, list[float]] = {}
        for problem, reward, result, diagnosed in zip(self.problems, self.rewards.tolist(), self.results,
                                                       self.diagnostics):
            values.setdefault(problem.task, []).append(reward)
            for name, value in {**result.components,
                                **{f"{problem.task}/{k}": v for k, v in diagnosed.items()}}.items():
                values.setdefault(name, []).append(value)
        for name, series in values.items():
            metrics[f"reward/{name}"] = sum(series) / len(series)
        return metrics
