"""Held-out evaluation with greedy decoding.

Metrics (all rates in [0, 1]):
The per-field rates are the reward criteria of rookworld.rewards (docs/rewards.md), averaged:
  eval/P/format       M:, E:, B: fields, 1-5 UCI moves, one eval per move, one UCI best move
  eval/P/legal_best   the B: move is legal in the position
  eval/P/best_move    the B: move equals the engine's rank-1 move
  eval/P/top5         |proposed moves ∩ engine top-5| / |engine top-5|
  eval/P/eval_accuracy  see docs/rewards.md
  eval/P/eval_mae     mean |E - engine eval| in pawns (clipped to ±10) over proposed moves that are
                      among the engine's candidates (lower is better; absent when none match)
  eval/A/format       four fields: a valid FEN, a task reward value, flags 0/1
  eval/A/next_state   exact next FEN
  eval/A/reward, eval/A/terminated, eval/A/truncated   each field exact
  eval/P/score = mean(format, legal_best, best_move, top5)
  eval/A/score = ½·next_state + ½·mean(reward, terminated, truncated)
  eval/score   = ½·eval/P/score + ½·eval/A/score  (both held-out sets always, whatever the task mix,
                 so runs with different mixes compare; this is what sweeps optimise)
EvalResult.problem_scores: each problem's own task score (the eval/P/score or eval/A/score formula on
its criteria), in problem order: the paired values the Wilcoxon pruner compares across trials.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from rookworld.rewards import CRITERIA, parse_completion, score_answer
from rookworld.rollout import Rollout, decode_completions, generate_for_problems
from rookworld.tasks import PolicyTruth, Problem
from rookworld.tasks.arbiter import render_arbiter_completion
from rookworld.tasks.policy import PolicyAnswer, render_policy_completion

EVAL_CLIP_PAWNS = 10.0


@dataclass
class EvalResult:
    metrics: dict[str, float]
    samples: list[dict] = field(default_factory=list)
    problem_scores: list[float] = field(default_factory=list)  # each problem's task score, in problem order

    @property
    def score(self) -> float:
        return self.metrics["eval/score"]


def score_heldout(problem: Problem, completion: str) -> dict[str, float]:
    """The reward criteria of one completion (rookworld.rewards), plus the eval MAE for P:."""
    answer = parse_completion(problem, completion)
    scores = score_answer(problem, answer) or dict.fromkeys(CRITERIA[problem.task], 0.0)
    if problem.task == "P":
        mae = eval_mae(problem.truth, answer)
        if mae is not None:
            scores["eval_mae"] = mae
    return scores


def eval_mae(truth: PolicyTruth, answer: PolicyAnswer | None) -> float | None:
    """Mean |E - engine eval| (clipped) over the parsed answer's moves among the engine's candidates."""
    if answer is None or len(answer.evals) != len(answer.moves):
        return None
    engine = {c.move: c.eval for c in truth.candidates}
    errors = [abs(_clip(e) - _clip(engine[m])) for m, e in zip(answer.moves, answer.evals) if m in engine]
    return sum(errors) / len(errors) if errors else None


def perfect_completion(problem: Problem) -> str:
    if problem.task == "P":
        return render_policy_completion(problem.truth)
    return render_arbiter_completion(problem.truth)


def _clip(pawns: float) -> float:
    return max(-EVAL_CLIP_PAWNS, min(EVAL_CLIP_PAWNS, pawns))


def _mean_by_key(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for row in rows for k in row}
    return {k: sum(r[k] for r in rows if k in r) / sum(1 for r in rows if k in r) for k in sorted(keys)}


def task_scores(metrics: dict[str, float]) -> dict[str, float]:
    p = [metrics.get(f"eval/P/{k}", 0.0) for k in ("format", "legal_best", "best_move", "top5")]
    a_fields = [metrics.get(f"eval/A/{k}", 0.0) for k in ("reward", "terminated", "truncated")]
    p_score = sum(p) / len(p)
    a_score = 0.5 * metrics.get("eval/A/next_state", 0.0) + 0.5 * sum(a_fields) / len(a_fields)
    return {"eval/P/score": p_score, "eval/A/score": a_score, "eval/score": 0.5 * (p_score + a_score)}


def problem_score(problem: Problem, scored: dict[str, float]) -> float:
    """One problem's share of eval/score: its task's score formula (eval/P/score or eval/A/score) on its own
    criteria; the paired per-position values a statistical pruner compares across trials."""
    return task_scores({f"eval/{problem.task}/{k}": v for k, v in scored.items()})[f"eval/{problem.task}/score"]


def evaluate(policy, tokenizer, problems: list[Problem], reward_fn, max_new_tokens: dict[str, int],
             batch_size: int, num_samples_logged: int, decoder=None,
             generator: torch.Generator | None = None) -> EvalResult:
    """Greedy completions for every held-out problem, scored field by field. `decoder`: the trainer's
    StaticDecoder on CUDA (with its generator, which keeps its captured graphs valid; greedy decoding
    draws nothing from it)."""
    rows: dict[str, list[dict[str, float]]] = {"P": [], "A": []}
    samples, problem_scores = [], []
    for start in range(0, len(problems), batch_size):
        chunk = problems[start:start + batch_size]
        rollout: Rollout = generate_for_problems(policy, tokenizer, chunk, max_new_tokens, greedy=True,
                                                 generator=generator, decoder=decoder)
        for problem, completion in zip(chunk, decode_completions(tokenizer, rollout)):
            scored = score_heldout(problem, completion)
            rows[problem.task].append(scored)
            problem_scores.append(problem_score(problem, scored))
            if len(samples) < num_samples_logged:
                samples.append({"task": problem.task, "prompt": problem.prompt_text,
                                "completion": completion, "reward": reward_fn(problem, completion).total,
                                "ground_truth": perfect_completion(problem), **scored})
    metrics = {}
    for task, task_rows in rows.items():
        if task_rows:
            metrics.update({f"eval/{task}/{k}": v for k, v in _mean_by_key(task_rows).items()})
    metrics.update(task_scores(metrics))
    return EvalResult(metrics=metrics, samples=samples, problem_scores=problem_scores)
