"""The two RookWorld tasks: P: (policy / analysis) and A: (environment / arbiter)."""
from rookworld.tasks.problem import Problem
from rookworld.tasks.policy import (
    Candidate,
    PolicyAnswer,
    PolicyTruth,
    parse_policy,
    policy_problem,
    policy_prompt,
    render_policy_completion,
)
from rookworld.tasks.arbiter import (
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

__all__ = [
    "Problem",
    "Candidate", "PolicyTruth", "PolicyAnswer",
    "policy_prompt", "policy_problem", "render_policy_completion", "parse_policy",
    "ArbiterTruth", "ArbiterAnswer",
    "arbiter_prompt", "arbiter_truth", "arbiter_problem", "arbiter_problem_from_game",
    "history_with_move", "render_arbiter_completion", "parse_arbiter",
]
