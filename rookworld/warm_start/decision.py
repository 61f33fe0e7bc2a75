"""Whether a round's model replaces the shipped one: a paired test on the validation chess score.

Both models answer the same held-out problems (the whole validation P: pool and A: part, greedy). The score is
eval/score = ½ mean(P: problem scores) + ½ mean(A: problem scores) (rookworld/judge/evaluate.py, eval.score=chess),
and its change is the same combination of the per-problem differences d_i = candidate_i - baseline_i, so

    change = ½ mean_P(d) + ½ mean_A(d),    se = sqrt(¼ var_P(d) / n_P + ¼ var_A(d) / n_A)

(evaluate.score_standard_error). With thousands of problems the change is normal to a good approximation, and
the one-sided p-value of "the candidate is better" is 1 - Φ(change / se). The round ships when p <= alpha.
The test part never decides: it is only reported (rookworld/warm_start/lineage.py).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from rookworld.judge.evaluate import EvalResult, judge_change


@dataclass(frozen=True)
class Decision:
    ship: bool
    candidate: float  # validation chess score of the round's model
    baseline: float  # ... of the shipped one, on the same problems
    change: float
    paired_se: float
    p_value: float  # one-sided: the candidate is better
    alpha: float
    problems: int
    better: int  # problems the candidate scores higher on
    worse: int

    def line(self) -> str:
        verb = "ships" if self.ship else "does not ship"
        return (f"round {verb}: validation chess score {self.baseline:.4f} -> {self.candidate:.4f} "
                f"({self.change:+.4f}, paired standard error {self.paired_se:.4f} over {self.problems} problems: "
                f"{self.better} better, {self.worse} worse; one-sided p = {self.p_value:.2g}, alpha {self.alpha})")

    def as_dict(self) -> dict:
        return asdict(self)


def one_sided_p(change: float, paired_se: float) -> float:
    """1 - Φ(change / se); with no spread, 0 for a rise and 1 otherwise."""
    if paired_se == 0:
        return 0.0 if change > 0 else 1.0
    return 0.5 * math.erfc(change / paired_se / math.sqrt(2))


def decide(candidate: EvalResult, baseline: EvalResult, tasks: list[str], alpha: float) -> Decision:
    """The paired test of `candidate` against `baseline` on the same problems (their tasks in order)."""
    if len(candidate.problem_scores) != len(baseline.problem_scores) or len(tasks) != len(baseline.problem_scores):
        raise ValueError(f"paired test needs the same problems: {len(candidate.problem_scores)} candidate scores, "
                         f"{len(baseline.problem_scores)} baseline scores, {len(tasks)} tasks")
    change = judge_change(baseline, candidate, tasks, at_step=0)
    differences = [c - b for c, b in zip(candidate.problem_scores, baseline.problem_scores)]
    p = one_sided_p(change.change, change.paired_se)
    return Decision(ship=p <= alpha, candidate=candidate.score, baseline=baseline.score, change=change.change,
                    paired_se=change.paired_se, p_value=p, alpha=alpha, problems=len(tasks),
                    better=sum(d > 0 for d in differences), worse=sum(d < 0 for d in differences))
