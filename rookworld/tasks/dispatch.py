"""A Problem routed to its task: parser, reward criteria, perfect completion, held-out scores.

The only place that dispatches on `problem.task`; each task's own logic lives in policy.py / arbiter.py.
"""
from __future__ import annotations

from rookworld.tasks.arbiter import (ARBITER_CRITERIA, ArbiterAnswer, arbiter_scores, parse_arbiter,
                                     render_arbiter_completion, transition_slice)
from rookworld.tasks.arbiter import EXACT_CRITERIA as ARBITER_EXACT
from rookworld.tasks.policy import (DEFAULT_EVAL_SCALE, POLICY_CRITERIA, PolicyAnswer, eval_mae, parse_policy,
                                    policy_consistency, policy_scores, render_policy_completion)
from rookworld.tasks.policy import EXACT_CRITERIA as POLICY_EXACT
from rookworld.tasks.move_values import skill_scores
from rookworld.tasks.problem import Problem

CRITERIA = {"P": POLICY_CRITERIA, "A": ARBITER_CRITERIA}
EXACT_CRITERIA = {"P": POLICY_EXACT, "A": ARBITER_EXACT}


def parse_completion(problem: Problem, completion: str) -> PolicyAnswer | ArbiterAnswer | None:
    """The completion parsed by its task's parser, or None when it does not parse."""
    return parse_policy(completion) if problem.task == "P" else parse_arbiter(completion)


def score_answer(problem: Problem, answer: PolicyAnswer | ArbiterAnswer | None,
                 eval_scale: float = DEFAULT_EVAL_SCALE) -> dict[str, float] | None:
    """Unprefixed criteria of a parsed completion, or None when it did not parse."""
    if answer is None:
        return None
    if problem.task == "P":
        return policy_scores(problem.truth, answer, eval_scale)
    return arbiter_scores(problem.truth, answer)


def score_completion(problem: Problem, completion: str,
                     eval_scale: float = DEFAULT_EVAL_SCALE) -> dict[str, float] | None:
    """Unprefixed criteria of one completion, or None when it does not parse."""
    return score_answer(problem, parse_completion(problem, completion), eval_scale)


def is_exact(task: str, scores: dict[str, float] | None) -> bool:
    """Every criterion of EXACT_CRITERIA[task] holds in `scores` (P: the B: move legal and the engine's
    best; A: the next state, reward and both flags); a completion that did not parse (None) is not exact."""
    return scores is not None and all(scores[name] == 1.0 for name in EXACT_CRITERIA[task])


def solves(problem: Problem, completion: str) -> bool:
    """The completion is exact (is_exact): what a pass rate counts (rookworld/data/difficulty.py)."""
    return is_exact(problem.task, score_completion(problem, completion))


def diagnostics(problem: Problem, answer: PolicyAnswer | ArbiterAnswer | None,
                scores: dict[str, float] | None) -> dict[str, float]:
    """Where learning happens, beyond the reward criteria: P: the answer's internal consistency
    (consistency/<check>); A: exact next state in the transition's slice (next_state/<slice>)."""
    if problem.task == "P":
        return {f"consistency/{k}": v for k, v in policy_consistency(problem.truth, answer).items()}
    return {f"next_state/{transition_slice(problem.truth)}": scores["next_state"] if scores else 0.0}


def perfect_completion(problem: Problem) -> str:
    if problem.task == "P":
        return render_policy_completion(problem.truth)
    return render_arbiter_completion(problem.truth)


def score_heldout(problem: Problem, completion: str) -> dict[str, float]:
    """The reward criteria of one completion (rookworld.judge.rewards), plus for P: the eval MAE and the chess-skill
    scores that apply to the position (rookworld/tasks/move_values.py)."""
    answer = parse_completion(problem, completion)
    scored = score_answer(problem, answer)
    scores = {**(scored or dict.fromkeys(CRITERIA[problem.task], 0.0)), **diagnostics(problem, answer, scored)}
    if problem.task == "P":
        mae = eval_mae(problem.truth, answer)
        if mae is not None:
            scores["eval_mae"] = mae
        scores.update(skill_scores(problem.truth, answer))
    return scores
