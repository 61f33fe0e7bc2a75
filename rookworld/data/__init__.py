"""Data: bundled engine-annotated positions, loaders to Problems, task-mix sampling, rookworld_7m.

    from rookworld.data import load_policy_problems, load_arbiter_problems, ProblemSampler
"""
from rookworld.data.positions import ProblemSampler, load_arbiter_problems, load_policy_problems

__all__ = ["ProblemSampler", "load_arbiter_problems", "load_policy_problems"]
