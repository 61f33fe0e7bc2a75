"""Measurement tools, never imported by the library:

    __main__.py           `python -m rookworld.bench`: timed GRPO steps (steps.py; models.py picks the model)
    checks.py             fast path vs plain path before timing (tokens, log-probs, loss)
    trl_compare.py        TRL's GRPOTrainer on the same shapes, when trl is installed
    tracking_overhead.py  `python -m rookworld.bench.tracking_overhead`: what MLflow tracking costs a step
    selfplay_speed.py     `python -m rookworld.bench.selfplay_speed`: self-play throughput of two source trees, A/B
"""
