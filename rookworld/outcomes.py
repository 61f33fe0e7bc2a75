"""Run outcomes: the one vocabulary the trainer sets, tracking records (tag `rookworld.outcome`)
and sweep summaries count."""

RUNNING = "running"          # started and not finished (or the process died before it could say)
SUCCESS = "success"          # ran its steps (or its time limit) and took the final evaluation
KL_FAILURE = "kl_failure"    # stopped: KL above kl.max for more than kl.max_steps_above steps
NAN_FAILURE = "nan_failure"  # stopped: non-finite loss or gradients for guards.max_nonfinite_steps steps
PRUNED = "pruned"            # stopped early by the sweep's pruner (objective = last evaluation)
FAILED = "failed"            # an exception ended the run (its message is the stop reason)

OUTCOMES = (RUNNING, SUCCESS, KL_FAILURE, NAN_FAILURE, PRUNED, FAILED)
