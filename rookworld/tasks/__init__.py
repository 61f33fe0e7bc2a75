"""The two RookWorld tasks: P: (policy / analysis) and A: (environment / arbiter).

Each task module owns its format, parser, ground truth, reward criteria and held-out evaluation
(docs/tasks.md); dispatch.py routes a Problem to its task.
"""
from rookworld.tasks.problem import Problem
from rookworld.tasks.policy import (
    DEFAULT_EVAL_SCALE,
    POLICY_CRITERIA,
    Candidate,
    PolicyAnswer,
    PolicyTruth,
    parse_policy,
    policy_problem,
    policy_prompt,
    render_policy_completion,
)
from rookworld.tasks.arbiter import (
    ARBITER_CRITERIA,
    ArbiterAnswer,
    ArbiterTruth,
    arbiter_problem,
    arbiter_problem_from_game,
    arbiter_prompt,
    arbiter_truth,
    history_with_move,
    parse_arbiter,
    render_arbiter_completion,
)
from rookworld.tasks.move_values import (MOVE_VALUE_CRITERIA, MissingActionValues, move_value_scores,
                                         require_action_values)
from rookworld.tasks.dispatch import (
    CRITERIA,
    EXACT_CRITERIA,
    is_exact,
    parse_completion,
    perfect_completion,
    score_answer,
    score_completion,
    score_heldout,
    solves,
)

__all__ = [
    "Problem",
    "Candidate", "PolicyTruth", "PolicyAnswer",
    "policy_prompt", "policy_problem", "render_policy_completion", "parse_policy",
    "ArbiterTruth", "ArbiterAnswer",
    "arbiter_prompt", "arbiter_truth", "arbiter_problem", "arbiter_problem_from_game",
    "history_with_move", "render_arbiter_completion", "parse_arbiter",
    "POLICY_CRITERIA", "ARBITER_CRITERIA", "CRITERIA", "EXACT_CRITERIA", "DEFAULT_EVAL_SCALE",
    "MOVE_VALUE_CRITERIA", "MissingActionValues", "move_value_scores", "require_action_values",
    "parse_completion", "score_answer", "score_completion", "perfect_completion", "score_heldout",
    "is_exact", "solves",
]
