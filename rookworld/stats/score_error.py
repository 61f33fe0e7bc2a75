"""The standard error of eval/score (½·mean of the P: scores + ½·mean of the A: scores) from per-problem values."""
from __future__ import annotations


def score_standard_error(tasks: list[str], values: list[float]) -> float:
    """Standard error of eval/score (½·mean of P: values + ½·mean of A: values) from per-problem `values`:
    per-problem scores give the score's own error, per-problem differences of two evaluations of the
    same problems give the error of the change (paired)."""
    variance = 0.0
    for task in ("P", "A"):
        own = [v for t, v in zip(tasks, values) if t == task]
        if len(own) >= 2:
            mean = sum(own) / len(own)
            variance += 0.25 * sum((v - mean) ** 2 for v in own) / (len(own) - 1) / len(own)
    return variance ** 0.5
