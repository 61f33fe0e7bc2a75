"""Run outcomes and results: the one vocabulary the trainer sets, tracking records (tag
`rookworld.outcome`, metric `objective`), the sweep's worker tells Optuna and its summaries count."""
from __future__ import annotations

from dataclasses import dataclass

RUNNING = "running"          # started and not finished (or the process died before it could say)
SUCCESS = "success"          # ran its steps (or its time limit) and took the final evaluation
KL_FAILURE = "kl_failure"    # stopped: KL above kl.max for more than kl.max_steps_above steps
NAN_FAILURE = "nan_failure"  # stopped: guards.max_nonfinite_steps non-finite steps (loss, gradients, weights, logits)
DIVERGED_KL_GROWTH = "diverged:kl_growth"  # stopped: KL racing toward kl.max (guards.kl_growth), before it gets there
DIVERGED_ENTROPY = "diverged:entropy"      # stopped: token entropy collapsed against the run's start
DIVERGED_GRAD_NORM = "diverged:grad_norm"  # stopped: gradient-norm spikes against the run's running median
DIVERGED_REWARD = "diverged:reward"        # stopped: mean reward collapsed against the run's start
PRUNED = "pruned"            # stopped early by the sweep's pruner (objective = last evaluation)
FAILED = "failed"            # an exception ended the run (its message is the stop reason)

DIVERGED_OUTCOMES = (DIVERGED_KL_GROWTH, DIVERGED_ENTROPY, DIVERGED_GRAD_NORM, DIVERGED_REWARD)
FAILURE_OUTCOMES = (KL_FAILURE, NAN_FAILURE, *DIVERGED_OUTCOMES)  # each ends a run with objective.failure_penalty
OUTCOMES = (RUNNING, SUCCESS, KL_FAILURE, NAN_FAILURE, *DIVERGED_OUTCOMES, PRUNED, FAILED)

OBJECTIVE_METRIC = "objective"              # the run's logged objective (objective.metric's value, or the penalty)
OBJECTIVE_SE_METRIC = "objective/stderr"    # its standard error, from a successful run's final evaluation
OBJECTIVE_START_METRIC = "objective/start"  # objective.metric at step 0: the untrained model on the same problems


def standard_error_metric(metric: str) -> str:
    """The name an evaluation gives `metric`'s standard error (eval/score -> eval/score_se)."""
    return f"{metric}_se"


@dataclass
class RunResult:
    """What one run returns: to `python -m rookworld.train`'s caller, and to a sweep's worker."""
    outcome: str
    reason: str
    steps: int
    objective: float
    objective_se: float | None = None          # the final evaluation's standard error of the objective
    final_eval: dict[str, float] | None = None
    problem_scores: list[float] | None = None  # the final evaluation's per-problem scores, in problem order
