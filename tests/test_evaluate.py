"""The held-out score's standard error and the end-of-run line that says what changed."""
import math
import statistics

import pytest

from rookworld.judge.evaluate import (IMPROVED, NO_CHANGE, WORSE, EvalResult, classify_change, judge_change,
                                score_standard_error)


def test_the_standard_error_weights_each_task_by_its_half_of_eval_score():
    p, a = [0.2, 0.6, 0.7, 0.9], [0.0, 1.0, 1.0]
    expected = 0.5 * math.sqrt(statistics.variance(p) / len(p) + statistics.variance(a) / len(a))
    assert score_standard_error(["P"] * 4 + ["A"] * 3, p + a) == pytest.approx(expected)


def test_a_task_with_fewer_than_two_problems_or_equal_scores_adds_nothing():
    assert score_standard_error(["P", "A", "A"], [0.3, 0.5, 0.5]) == 0.0
    assert score_standard_error([], []) == 0.0


def result(scores, **metrics):
    tasks = ["P", "P", "A", "A"]
    p = sum(s for t, s in zip(tasks, scores) if t == "P") / 2
    a = sum(s for t, s in zip(tasks, scores) if t == "A") / 2
    return EvalResult(metrics={"eval/score": (p + a) / 2, **metrics}, problem_scores=list(scores))


def test_the_final_line_says_improved_only_beyond_the_paired_standard_error():
    tasks = ["P", "P", "A", "A"]
    before = result([0.5, 0.5, 0.5, 0.5], **{"eval/A/next_state": 0.5})
    consistent = result([0.6, 0.7, 0.6, 0.7], **{"eval/A/next_state": 0.75})
    line = judge_change(before, consistent, tasks, at_step=6).line
    assert line.startswith("improved after 6 steps: eval/score 0.5000 -> 0.6500 (+0.1500, paired standard error "
                           "0.0354 from the changes of 4 held-out problems: 4 better, 0 worse)")
    assert line.endswith("; rose: eval/A/next_state 0.500 -> 0.750")
    mixed = result([0.9, 0.1, 0.9, 0.3])  # +0.05 on average, with a spread far larger than that
    assert judge_change(before, mixed, tasks, at_step=6).line.startswith("no change beyond the standard error after 6")


def test_the_final_line_names_what_rose_and_what_fell_per_slice_included():
    tasks = ["P", "P", "A", "A"]
    before = result([0.5, 0.5, 0.5, 0.5], **{"eval/A/format": 0.9, "eval/A/next_state/illegal": 0.25,
                                             "eval/A/score": 0.5})
    after = result([0.5, 0.5, 0.9, 0.4], **{"eval/A/format": 0.8, "eval/A/next_state/illegal": 0.5,
                                            "eval/A/score": 0.65})
    line = judge_change(before, after, tasks, at_step=3).line
    assert "from the changes of 4 held-out problems: 1 better, 1 worse)" in line
    assert line.endswith("; rose: eval/A/next_state/illegal 0.250 -> 0.500, eval/A/score 0.500 -> 0.650"
                         "; fell: eval/A/format 0.900 -> 0.800")


def test_the_change_is_judged_by_the_paired_error_not_by_the_error_of_one_score():
    """Problems far apart in score that each gain about 0.05: the rise is a fifth of the standard error of
    one evaluation's score, yet seven times the standard error of the per-problem changes."""
    tasks = ["P", "P", "A", "A"]
    before, after = result([0.1, 0.9, 0.2, 0.8]), result([0.14, 0.96, 0.24, 0.86])
    assert score_standard_error(tasks, before.problem_scores) == pytest.approx(0.25)
    line = judge_change(before, after, tasks, at_step=8).line
    assert line.startswith("improved after 8 steps: eval/score 0.5000 -> 0.5500 (+0.0500, paired standard error "
                           "0.0071 from the changes of 4 held-out problems: 4 better, 0 worse)"), line


def test_a_drop_beyond_the_paired_standard_error_is_worse():
    """Every problem loses about 0.05: the drop is far beyond its paired error (the old line called a
    drop of 4.5 standard errors "no gain")."""
    tasks = ["P", "P", "A", "A"]
    before, after = result([0.5, 0.6, 0.5, 0.6]), result([0.44, 0.56, 0.46, 0.54])
    change = judge_change(before, after, tasks, at_step=8)
    assert change.verdict == WORSE
    assert change.line.startswith("worse after 8 steps: eval/score 0.5500 -> 0.5000 (-0.0500, paired standard error "
                                  "0.0071 from the changes of 4 held-out problems: 0 better, 4 worse)"), change.line
    assert change.metrics() == {"change/eval_score": pytest.approx(-0.05), "change/stderr": pytest.approx(0.0071, abs=1e-4)}


@pytest.mark.parametrize("change, paired, verdict", [
    (0.02, 0.01, IMPROVED), (-0.02, 0.01, WORSE), (0.005, 0.01, NO_CHANGE), (-0.005, 0.01, NO_CHANGE),
    (0.01, 0.01, NO_CHANGE), (-0.01, 0.01, NO_CHANGE), (0.0, 0.0, NO_CHANGE), (0.001, 0.0, IMPROVED),
])
def test_the_change_is_improved_worse_or_no_change_by_the_paired_error(change, paired, verdict):
    assert classify_change(change, paired) == verdict
