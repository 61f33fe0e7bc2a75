"""Property tests: parsers and rewards never raise and always return a finite value in
[malformed_penalty, 1.0], whatever the text (arbitrary, token soup, garbled valid, huge, unicode)."""
import math

import chess
from hypothesis import given, settings
from hypothesis import strategies as st

from rookworld.judge.rewards import CRITERIA, ExactReward, GraduatedReward
from rookworld.tasks import (
    ArbiterAnswer,
    Candidate,
    PolicyAnswer,
    PolicyTruth,
    arbiter_problem,
    arbiter_truth,
    parse_arbiter,
    parse_policy,
    policy_problem,
    render_arbiter_completion,
    render_policy_completion,
)

BLACK_FEN = "r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6"
PROBLEMS = (
    policy_problem(PolicyTruth(BLACK_FEN, (Candidate("c6d5", -2.0), Candidate("a6b4", -2.07), Candidate("a6b8", -2.66),
                                           Candidate("a6c7", -2.79), Candidate("c8d7", -2.92)))),
    policy_problem(PolicyTruth(chess.STARTING_FEN, (Candidate("e2e4", 0.3), Candidate("d2d4", 999.85)))),
    arbiter_problem(arbiter_truth(chess.STARTING_FEN, "e2e4", ["e2e4"])),
    arbiter_problem(arbiter_truth(chess.STARTING_FEN, "e1e2", ["e1e2"])),
    arbiter_problem(arbiter_truth("k7/8/2K5/8/8/8/8/1Q6 w - - 0 1", "b1b6", ["b1b6"])),
)
PERFECT = tuple(render_policy_completion(p.truth) if p.task == "P" else render_arbiter_completion(p.truth)
                for p in PROBLEMS)
REWARDS = (GraduatedReward(), ExactReward(), GraduatedReward(malformed_penalty=-1.0, eval_scale=0.01),
           ExactReward(malformed_penalty=-0.5))
HUGE = 100_000

TOKENS = ("M:", "E:", "B:", " ", "  ", "\n", "\t", "+", "e2e4", "c6d5", "a7a8q", "e1g1", "0000", "-2.0", "-2.07",
          "999.85", "nan", "inf", "-inf", "1e999", "1_0", "0", "1", "0.001", "0.5", "1.0", "-1.0", "w", "b", "-",
          "KQkq", "8/8/8/8/8/8/8/8", "rnbqkbnr/pppppppp", "k7/8", "/", "٣", "♔", "\x00", "\u2028", "é")
FEN_CHARS = "rnbqkpRNBQKP12345678/ wb-KQkqabcdefgh09+٣"
FEN_FIELD = st.text(alphabet=FEN_CHARS.replace(" ", "").replace("+", ""), min_size=1, max_size=12)
SIX_FIELDS = st.lists(FEN_FIELD, min_size=6, max_size=6).map(" ".join)
FLAG_OR_REWARD = st.sampled_from(("0", "1", "0.001", "0.5", "1.0", "-1.0", "2", ""))


def check_answer_types(text: str) -> None:
    policy = parse_policy(text)
    assert policy is None or isinstance(policy, PolicyAnswer)
    if policy is not None:
        assert all(math.isfinite(v) for v in policy.evals)
        assert policy.best_move is None or policy.best_move.strip() == policy.best_move != ""
    arbiter = parse_arbiter(text)
    assert arbiter is None or isinstance(arbiter, ArbiterAnswer)
    if arbiter is not None:
        assert arbiter.reward is None or math.isfinite(arbiter.reward)
        assert arbiter.terminated in (None, 0, 1) and arbiter.truncated in (None, 0, 1)


def check_rewards(text: str) -> None:
    check_answer_types(text)
    for problem in PROBLEMS:
        for reward in REWARDS:
            result = reward(problem, text)
            assert isinstance(result.total, float) and math.isfinite(result.total)
            assert reward.malformed_penalty <= result.total <= 1.0
            assert set(result.components) == {f"{problem.task}/{c}" for c in ("malformed",) + CRITERIA[problem.task]}
            assert all(0.0 <= v <= 1.0 for v in result.components.values())


def garble(text: str, data: st.DataObject) -> str:
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, len(text)))
    junk = data.draw(st.text(max_size=8) | st.sampled_from(TOKENS))
    operation = data.draw(st.sampled_from(("cut", "insert", "delete", "replace")))
    return {"cut": text[:i], "insert": text[:i] + junk + text[i:], "delete": text[:i] + text[j:],
            "replace": text[:i] + junk + text[j:]}[operation]


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_arbitrary_text(text):
    check_rewards(text)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(TOKENS) | st.text(max_size=4), max_size=40).map("".join))
def test_token_soup(text):
    check_rewards(text)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(PERFECT), st.data())
def test_garbled_valid_completions(perfect, data):
    text = perfect
    for _ in range(data.draw(st.integers(1, 3))):
        text = garble(text, data)
    check_rewards(text)


@settings(max_examples=500, deadline=None)
@given(SIX_FIELDS | st.text(alphabet=FEN_CHARS, max_size=30), st.lists(FLAG_OR_REWARD, min_size=3, max_size=3))
def test_arbiter_fen_like_fields(next_fen, fields):
    check_rewards("+".join([next_fen, *fields]))


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=1, max_size=20) | st.sampled_from(TOKENS), st.sampled_from(PERFECT))
def test_huge_repeated_inputs(unit, perfect):
    huge = (unit * (HUGE // len(unit) + 1))[:HUGE]
    check_rewards(huge)
    check_rewards(perfect + huge)
    check_rewards(huge + perfect)


def test_huge_structured_inputs():
    moves = " ".join(["e2e4"] * 20_000)
    for text in ("M:" * 50_000, "+" * HUGE, "9" * HUGE, "♔" * HUGE,
                 "M: " + moves + " E: " + "1 " * 20_000 + "B: e2e4",
                 "M: c6d5 E: " + "9" * HUGE + " B: c6d5", PERFECT[2].replace("0.001", "9" * HUGE),
                 "1" * HUGE + " w - - 0 1+0.001+0+0", "8/8/8/8/8/8/8/8 w - - " + "1" * 5000 + " 1+0.001+0+0"):
        check_rewards(text)
