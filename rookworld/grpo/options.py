"""The names the GRPO update's options take, without torch: the specs (rookworld/specs/) check a config
against them at the boundary, and the modules that implement each option dispatch on the same tuples. A
sweep's launcher and a refused command load these, never torch."""

SCALE_REWARDS = ("group", "batch", "none")                          # grpo.scale_rewards (advantages.py)
REWARD_AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")  # grpo.reward_aggregation (advantages.py)
ADVANTAGE_STDS = ("sample", "population")                           # grpo.advantage_std (advantages.py)
LOSS_TYPES = ("grpo", "dr_grpo", "token_mean")                      # grpo.loss_type (loss.py)
SAMPLER_CORRECTIONS = ("none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")  # sampler_correction.py
KL_ESTIMATORS = ("k1", "k2", "k3")                                  # kl.estimator (kl.py)
KL_PLACEMENTS = ("loss", "reward")                                  # kl.placement (kl.py)
