"""How much of the spread between trials is evaluation noise: the noise table of docs/lab/evaluation-noise.md.

Input: one configuration trained on several seeds, each final model evaluated on the same held-out problems
(per-problem scores in problem order, EvalResult.problem_scores). Size N means the first N P: and the first
N A: problems, as eval.num_policy = eval.num_arbiter = N take them, so one evaluation of the whole part
gives every smaller size. For each N:

  score_s           = ½·mean of seed s's P: scores + ½·mean of its A: scores          (its eval/score)
  observed spread   = sd over the seeds of score_s: what a sweep sees between runs of one configuration
  absolute SE       = mean over the seeds of eval/score_se: one score's error against all positions
  evaluation noise  = sqrt(mean over seed pairs of SE_paired(s, t)² / 2), SE_paired from the per-problem
                      differences of s and t (score_standard_error): the evaluation's share, per run, of
                      the difference between two runs scored on the same problems, as every sweep trial is
  training spread   = sqrt(max(0, observed spread² - evaluation noise²)): what the training seed moves

since score_s - score_t = (training difference) + (evaluation difference), Var = 2·training² + SE_paired².
The absolute SE is larger than the evaluation noise: the positions that are hard for every run move
every run's score alike and cancel in a comparison. Sweeps compare, so their evaluation size is chosen on
`noise / training spread at the largest size` (docs/lab/evaluation-noise.md: at most 0.5).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
import math
import statistics

from rookworld.stats.score_error import score_standard_error

TASKS = ("P", "A")


@dataclass(frozen=True)
class NoiseRow:
    size: int               # N P: + N A: problems
    seeds: int
    mean: float             # mean eval/score over the seeds
    observed: float         # sd of eval/score over the seeds
    absolute_se: float      # mean eval/score_se
    noise: float            # evaluation noise per run in a paired comparison
    training: float         # training spread: the observed spread without the evaluation noise


def _first(tasks: list[str], values: list[float], size: int) -> tuple[list[str], list[float]]:
    """The first `size` problems of each task (in order), with their values."""
    taken = dict.fromkeys(TASKS, 0)
    kept_tasks, kept = [], []
    for task, value in zip(tasks, values):
        if taken[task] < size:
            taken[task] += 1
            kept_tasks.append(task)
            kept.append(value)
    return kept_tasks, kept


def _score(tasks: list[str], values: list[float]) -> float:
    means = [statistics.fmean(v for t, v in zip(tasks, values) if t == task) for task in TASKS]
    return 0.5 * (means[0] + means[1])


def noise_row(tasks: list[str], runs: list[list[float]], size: int) -> NoiseRow:
    """The row for size N of `runs` (one per-problem score list per seed, all on the problems `tasks` names)."""
    if len(runs) < 2:
        raise ValueError(f"{len(runs)} seeds: the spread needs at least 2")
    available = min(tasks.count(task) for task in TASKS)
    if not 2 <= size <= available:
        raise ValueError(f"size={size}: between 2 and {available} problems of each task were evaluated")
    cut = [_first(tasks, run, size) for run in runs]
    sub_tasks = cut[0][0]
    scores = [_score(sub_tasks, values) for _, values in cut]
    observed = statistics.stdev(scores)
    paired = [score_standard_error(sub_tasks, [a - b for a, b in zip(x, y)]) ** 2
              for (_, x), (_, y) in combinations(cut, 2)]
    noise = math.sqrt(statistics.fmean(paired) / 2)
    return NoiseRow(size=size, seeds=len(runs), mean=statistics.fmean(scores), observed=observed,
                    absolute_se=statistics.fmean(score_standard_error(sub_tasks, v) for _, v in cut),
                    noise=noise, training=math.sqrt(max(0.0, observed ** 2 - noise ** 2)))


def noise_table(tasks: list[str], runs: list[list[float]], sizes: list[int]) -> list[NoiseRow]:
    return [noise_row(tasks, runs, size) for size in sorted(sizes)]


def smallest_size(rows: list[NoiseRow], max_ratio: float = 0.5) -> int | None:
    """The smallest size whose evaluation noise is at most max_ratio x the training spread measured at the
    largest size (the most precise estimate of it); None when none is."""
    reference = max(rows, key=lambda row: row.size).training
    fitting = [row.size for row in rows if row.noise <= max_ratio * reference]
    return min(fitting) if fitting else None
