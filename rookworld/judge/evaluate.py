"""Held-out evaluation with greedy decoding.

Metrics (all rates in [0, 1]):
The per-field rates are the reward criteria of each task (rookworld/tasks/, docs/rewards.md), averaged:
  eval/P/format       M:, E:, B: fields, 1-5 UCI moves, one eval per move, one UCI best move
  eval/P/legal_best   the B: move is legal in the position
  eval/P/best_move    the B: move is the engine's rank-1 move, or a candidate whose eval (2 decimals)
                      ties the rank-1 eval (PolicyTruth.best_moves)
  eval/P/top5         engine candidates among the first 5 proposed moves / max(engine candidates,
                      proposed moves): duplicates, weaker moves and a longer list cost
  eval/P/eval_accuracy  see docs/rewards.md
  eval/P/eval_mae     mean |E - engine eval| in pawns (clipped to ±10) over the distinct proposed moves
                      that are among the engine's candidates, each with its first E: value (lower is
                      better; absent when none match)
  eval/A/format       four fields: a valid FEN, a task reward value, flags 0/1
  eval/A/next_state   exact next FEN
  eval/A/reward, eval/A/terminated, eval/A/truncated   each field exact
The task scores, by eval.score (conf/eval/default.yaml):
  graduated (default):
    eval/P/score = mean(format, legal_best, best_move, top5)
    eval/A/score = ½·next_state + ½·mean(reward, terminated, truncated)
  chess (what a player keeps; the held-out P: positions need action values):
    eval/P/score = 1 - win_prob_loss   (the win probability the B: move keeps; an illegal one keeps none)
    eval/A/score = next_state          (the exact next position)
  eval/score   = ½·eval/P/score + ½·eval/A/score  (both held-out sets always, whatever the task mix,
                 so runs with different mixes compare; this is what sweeps optimise)
  eval/score_se = the standard error of eval/score from the per-problem task scores:
                 ½·sqrt(s_P²/n_P + s_A²/n_A) (sample variances; a set of fewer than 2 problems adds 0)
  eval/P/score_se, eval/A/score_se = each task score's standard error, s_T/sqrt(n_T)
Chess skill (rookworld/tasks/move_values.py, docs/rewards.md), each with `<name>_se`, its standard error,
and `<name>_n`, the positions it is measured on; a missing, unparsable or illegal B: move loses the game
(win probability 0, -1000 centipawns):
  eval/P/best_move_se       the standard error of eval/P/best_move
  eval/P/mate_in_one        the B: move mates, over the positions that have a mate in one (python-chess)
  with action values only (else left out, and EvalResult.notes says so):
  eval/P/win_prob_loss      mean win-probability loss of the B: move against the best move (lower is better)
  eval/P/cp_loss_median     median centipawn loss (values clipped to +-1000 cp); its _se is a seeded bootstrap's
  eval/P/blunder            share of B: moves losing >= 0.30 win probability (Lichess's blunder)
  eval/P/only_move          the B: move is the best one, over the positions whose best move beats the second
                            by >= 0.30 win probability
EvalResult.problem_scores: each problem's own task score (the eval/P/score or eval/A/score formula on
its criteria), in problem order: the paired values the Wilcoxon pruner compares across trials.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np
import torch

from rookworld.judge.rollout import Rollout, decode_completions, generate_for_problems
from rookworld.stats.score_error import score_standard_error
from rookworld.tasks import Problem, perfect_completion, score_heldout
from rookworld.tracking import CHANGE_METRIC, CHANGE_SE_METRIC

@dataclass
class EvalResult:
    metrics: dict[str, float]
    samples: list[dict] = field(default_factory=list)
    problem_scores: list[float] = field(default_factory=list)  # each problem's task score, in problem order
    notes: list[str] = field(default_factory=list)  # what the metrics leave out and why

    @property
    def score(self) -> float:
        return self.metrics["eval/score"]


SKILL_MEANS = ("best_move", "mate_in_one", "win_prob_loss", "blunder", "only_move")  # reported with _se and _n
VALUE_METRICS = ("win_prob_loss", "cp_loss_median", "blunder", "only_move")        # need action values
BOOTSTRAP_RESAMPLES = 1000


def _mean_by_key(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for row in rows for k in row} - {"cp_loss"}  # the centipawn loss is reported by its median
    return {k: sum(r[k] for r in rows if k in r) / sum(1 for r in rows if k in r) for k in sorted(keys)}


def task_scores(metrics: dict[str, float], score: str) -> dict[str, float]:
    """eval/P/score, eval/A/score and eval/score of task metrics under the formula `score` (eval.score,
    rookworld/specs/eval.py: graduated | chess)."""
    if score == "chess":
        p_score = 1.0 - metrics.get("eval/P/win_prob_loss", 1.0)
        a_score = metrics.get("eval/A/next_state", 0.0)
    elif score == "graduated":
        p = [metrics.get(f"eval/P/{k}", 0.0) for k in ("format", "legal_best", "best_move", "top5")]
        a_fields = [metrics.get(f"eval/A/{k}", 0.0) for k in ("reward", "terminated", "truncated")]
        p_score = sum(p) / len(p)
        a_score = 0.5 * metrics.get("eval/A/next_state", 0.0) + 0.5 * sum(a_fields) / len(a_fields)
    else:  # never silently another formula
        raise ValueError(f"score={score!r}: graduated or chess")
    return {"eval/P/score": p_score, "eval/A/score": a_score, "eval/score": 0.5 * (p_score + a_score)}


def problem_score(problem: Problem, scored: dict[str, float], score: str) -> float:
    """One problem's share of eval/score: its task's score formula (eval/P/score or eval/A/score) on its own
    criteria; the paired per-position values a statistical pruner compares across trials."""
    own = {f"eval/{problem.task}/{k}": v for k, v in scored.items()}
    return task_scores(own, score)[f"eval/{problem.task}/score"]


def evaluate(decoder, tokenizer, problems: list[Problem], reward_fn, max_new_tokens: dict[str, int],
             batch_size: int, num_samples_logged: int, *, score: str,
             generator: torch.Generator | None = None) -> EvalResult:
    """Greedy completions for every held-out problem, scored field by field. `decoder`: the trainer's
    (make_decoder: StaticDecoder on CUDA, used with its generator, which keeps its captured graphs
    valid; greedy decoding draws nothing from it), or a PlainDecoder."""
    rows: dict[str, list[dict[str, float]]] = {"P": [], "A": []}
    samples, problem_scores = [], []
    for start in range(0, len(problems), batch_size):
        chunk = problems[start:start + batch_size]
        rollout: Rollout = generate_for_problems(decoder, tokenizer, chunk, max_new_tokens, greedy=True,
                                                 generator=generator)
        for problem, completion in zip(chunk, decode_completions(tokenizer, rollout)):
            scored = score_heldout(problem, completion)
            rows[problem.task].append(scored)
            problem_scores.append(problem_score(problem, scored, score))
            if len(samples) < num_samples_logged:
                samples.append({"task": problem.task, "prompt": problem.prompt_text,
                                "completion": completion, "reward": reward_fn(problem, completion).total,
                                "ground_truth": perfect_completion(problem), **scored})
    metrics = {}
    for task, task_rows in rows.items():
        if task_rows:
            metrics.update({f"eval/{task}/{k}": v for k, v in _mean_by_key(task_rows).items()})
    skill, notes = skill_metrics(rows["P"])
    metrics.update(skill)
    # a task with no held-out problem has no score of its own (its share of eval/score is 0)
    metrics.update({k: v for k, v in task_scores(metrics, score).items() if k == "eval/score" or rows[k.split("/")[1]]})
    metrics["eval/score_se"] = score_standard_error([p.task for p in problems], problem_scores)
    for task, task_rows in rows.items():
        if task_rows:  # each task score's own standard error: an objective.metric of its own
            metrics[f"eval/{task}/score_se"] = _standard_error([value for problem, value in zip(problems, problem_scores)
                                                                if problem.task == task])
    return EvalResult(metrics=metrics, samples=samples, problem_scores=problem_scores, notes=notes)


def skill_metrics(policy_rows: list[dict[str, float]]) -> tuple[dict[str, float], list[str]]:
    """The chess-skill metrics of the held-out P: rows (score_heldout's), each with its standard error and
    count, and the notes on what is left out (positions without action values)."""
    metrics: dict[str, float] = {}
    for key in SKILL_MEANS:
        values = [row[key] for row in policy_rows if key in row]
        if values:
            metrics.update({f"eval/P/{key}": statistics.fmean(values), f"eval/P/{key}_se": _standard_error(values),
                            f"eval/P/{key}_n": float(len(values))})
    losses = [row["cp_loss"] for row in policy_rows if "cp_loss" in row]
    if losses:
        metrics.update({"eval/P/cp_loss_median": float(np.median(losses)),
                        "eval/P/cp_loss_median_se": _bootstrap_median_se(losses),
                        "eval/P/cp_loss_median_n": float(len(losses))})
    if not policy_rows or len(losses) == len(policy_rows):
        return metrics, []
    names = ", ".join(f"eval/P/{k}" for k in VALUE_METRICS)
    if not losses:
        return metrics, [f"{names} left out: none of the {len(policy_rows)} held-out P: positions has action_values "
                         "(docs/rewards.md: the move-value data)"]
    return metrics, [f"{names} are over the {len(losses)} of {len(policy_rows)} held-out P: positions that have "
                     "action_values"]


def _standard_error(values: list[float]) -> float:
    return statistics.stdev(values) / len(values) ** 0.5 if len(values) >= 2 else 0.0


def _bootstrap_median_se(values: list[float]) -> float:
    """The standard deviation of the median over seeded bootstrap resamples (the same values give the same error)."""
    if len(values) < 2:
        return 0.0
    data = np.asarray(values, dtype=np.float64)
    resamples = np.random.default_rng(0).choice(data, size=(BOOTSTRAP_RESAMPLES, len(data)), replace=True)
    return float(np.median(resamples, axis=1).std(ddof=1))


IMPROVED, WORSE, NO_CHANGE = "improved", "worse", "no_change"  # the run's change: the tag rookworld.change


def classify_change(change: float, paired_se: float) -> str:
    """improved / worse when eval/score moved up / down by more than the paired standard error of the
    change, else no_change."""
    if change > paired_se:
        return IMPROVED
    if change < -paired_se:
        return WORSE
    return NO_CHANGE


@dataclass(frozen=True)
class Change:
    """eval/score from one evaluation to a later one of the same problems (judge_change)."""
    verdict: str  # IMPROVED, WORSE or NO_CHANGE
    line: str  # the one line printed at the end of a run and written to its log
    change: float  # eval/score after - before
    paired_se: float  # the standard error of the change, from the per-problem differences

    def metrics(self) -> dict[str, float]:
        return {CHANGE_METRIC: self.change, CHANGE_SE_METRIC: self.paired_se}


_VERDICT_WORDS = {IMPROVED: "improved", WORSE: "worse", NO_CHANGE: "no change beyond the standard error"}


def judge_change(before: EvalResult, after: EvalResult, tasks: list[str], at_step: int) -> Change:
    """eval/score from `before` to `after` with the paired standard error of the change (from the
    per-problem differences after - before on the same problems, not the error of one score), whether it
    rose or fell beyond that error, how many held-out problems scored better and worse, and the held-out
    metrics (per-slice ones included) that rose and that fell."""
    change = after.score - before.score
    differences = [b - a for a, b in zip(before.problem_scores, after.problem_scores)]
    paired = score_standard_error(tasks, differences)
    verdict = classify_change(change, paired)
    better, worse = sum(d > 0 for d in differences), sum(d < 0 for d in differences)
    moved = {k: (before.metrics[k], v) for k, v in after.metrics.items()
             if k in before.metrics and k.count("/") >= 2 and not k.endswith(("_se", "_n"))
             and abs(v - before.metrics[k]) >= 5e-4}
    rose = [f"{k} {a:.3f} -> {b:.3f}" for k, (a, b) in moved.items() if b > a]
    fell = [f"{k} {a:.3f} -> {b:.3f}" for k, (a, b) in moved.items() if b < a]
    line = (f"{_VERDICT_WORDS[verdict]} after {at_step} steps: eval/score {before.score:.4f} -> {after.score:.4f} "
            f"({change:+.4f}, paired standard error {paired:.4f} from the changes of {len(tasks)} held-out problems: "
            f"{better} better, {worse} worse)"
            + (f"; rose: {', '.join(rose)}" if rose else "") + (f"; fell: {', '.join(fell)}" if fell else ""))
    return Change(verdict, line, change, paired)
