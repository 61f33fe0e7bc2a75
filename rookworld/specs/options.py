"""The names the GRPO update's options take, without torch: the specs (grpo.py, kl.py) check a config
against them at the boundary; the modules of rookworld/grpo/ that implement each option dispatch on the
plain strings they receive. A sweep's launcher and a refused command load these, never torch."""

SCALE_REWARDS = ("group", "batch", "none")                          # grpo.scale_rewards (grpo/advantages.py)
REWARD_AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")  # grpo.reward_aggregation (grpo/advantages.py)
ADVANTAGE_STDS = ("sample", "population")                           # grpo.advantage_std (grpo/advantages.py)
LOSS_TYPES = ("grpo", "dr_grpo", "token_mean")                      # grpo.loss_type (grpo/loss.py)
SAMPLER_CORRECTIONS = ("none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")  # grpo/sampler_correction.py
KL_ESTIMATORS = ("k1", "k2", "k3")                                  # kl.estimator (grpo/kl.py)
KL_PLACEMENTS = ("loss", "reward")                                  # kl.placement (grpo/kl.py)
