"""Data: bundled engine-annotated positions, loaders to Problems, task-mix sampling, rookworld_7m.

    from rookworld.data import load_policy_problems, load_arbiter_problems, ProblemSampler
"""

__all__ = ["ProblemSampler", "load_arbiter_problems", "load_policy_problems"]


def __getattr__(name: str):
    # Lazy, so that `python -m rookworld.data.annotate` does not import annotate twice.
    if name in __all__:
        from rookworld.data import positions

        return getattr(positions, name)
    raise AttributeError(f"module 'rookworld.data' has no attribute {name!r}")
