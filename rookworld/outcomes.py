"""Run outcomes: the one vocabulary the trainer sets, tracking records (tag `rookworld.outcome`)
and sweep summaries count."""

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
