"""Move values: the loader's action_values, reward=move_value's properties and its adversarial suite
(docs/rewards.md), on hand-made positions and values with real python-chess."""
import json
import math
import random
import re

import chess
import pytest

from rookworld.run.build import build_run, eval_problems, heldout_problems, positions_of, require_move_values
from rookworld.app.config import compose, load_run
from rookworld.specs.rules import ConfigError
from rookworld.judge.evaluate import evaluate, problem_score, skill_metrics, task_scores
from rookworld.model.sampling import PlainDecoder
from rookworld.data.move_cases import random_game_positions
from rookworld.data.positions import BUNDLED, load_policy_problems
from rookworld.data.records import read_jsonl
from rookworld.judge.rewards import GraduatedReward, MoveValueReward
from rookworld.specs.data import BundledData
from rookworld.tasks import (Candidate, MissingActionValues, PolicyTruth, arbiter_problem, arbiter_truth,
                             policy_problem, render_arbiter_completion, score_heldout)
from rookworld.tasks.move_values import MOVE_VALUE_CRITERIA, move_losses, win_probability
from rookworld.tasks.policy import format_eval
from rookworld.tracking import make_tracker
from rookworld.train import run
from train_helpers import tiny_config

reward = MoveValueReward()
SCHOLAR = "r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5Q2/PPPP1PPP/RNB1K1NR w KQkq - 4 4"  # f3f7 mates
ONE_LEGAL = "8/2k2p2/6b1/8/2P2p2/2P3p1/8/4q2K w - - 0 69"                      # only h1g2


def valued_truth(fen: str, rng: random.Random, fixed: dict[str, float] | None = None) -> PolicyTruth:
    """A truth whose action values are hand-made: `fixed` ones, the rest drawn in [-4, 2] pawns."""
    legal = [m.uci() for m in chess.Board(fen).legal_moves]
    values = {m: round(rng.uniform(-4, 2), 2) for m in legal} | (fixed or {})
    ranked = sorted(values.items(), key=lambda kv: -kv[1])
    return PolicyTruth(fen, tuple(Candidate(m, v) for m, v in ranked[:5]),
                       action_values=tuple(Candidate(m, v) for m, v in ranked))


def completion(moves: list[str], evals: list[str], best: str, fen: str) -> str:
    return (" " * (90 - len(fen)) + "M: " + " ".join(moves).ljust(30) + "E: " + " ".join(evals).ljust(40)
            + "B: " + best)


def honest(truth: PolicyTruth, best: str | None = None, listed: int | None = None) -> str:
    """The k best moves by value with their values (k = min(5, legal moves)), B: the best (or `best`)."""
    ranked = sorted(truth.action_values, key=lambda c: -c.eval)[: min(5, len(truth.action_values))][:listed]
    return completion([c.move for c in ranked], [format_eval(c.eval) for c in ranked],
                      best or ranked[0].move, truth.fen)


def total(truth: PolicyTruth, text: str) -> float:
    return reward(policy_problem(truth), text).total


# ---- win probability (docs/rewards.md) ----------------------------------------------------------

@pytest.mark.parametrize("pawns, expected", [
    (0.0, 0.5), (1.0, 0.59103), (-1.0, 0.40897), (3.0, 0.75113), (10.0, 0.97545), (25.0, 0.97545),
    (-25.0, 0.02455), (999.99, 1.0), (-999.97, 0.0),
])
def test_win_probability_is_lichess_logistic_clipped_with_mates_at_one_and_zero(pawns, expected):
    assert win_probability(pawns) == pytest.approx(expected, abs=5e-6)
    lichess = 50 + 50 * (2 / (1 + math.exp(-0.00368208 * max(-1000, min(1000, 100 * pawns)))) - 1)
    assert abs(pawns) >= 900 or win_probability(pawns) == pytest.approx(lichess / 100)


def test_the_worked_example_of_docs_rewards_md():
    truth = PolicyTruth(SCHOLAR, (Candidate("f3f7", 999.99),), action_values=tuple(
        Candidate(m.uci(), {"f3f7": 999.99, "c4f7": -1.2, "b1c3": 0.6}.get(m.uci(), -2.0))
        for m in chess.Board(SCHOLAR).legal_moves))
    losses = move_losses(truth)
    assert losses["f3f7"] == 0.0 and losses["b1c3"] == pytest.approx(0.44499, abs=1e-5)
    assert math.exp(-losses["b1c3"] / 0.2) == pytest.approx(0.10807, abs=1e-5)
    text = completion(["f3f7", "b1c3", "c4f7"], ["999.99", "0.6", "-1.0"], "b1c3", SCHOLAR)
    result = reward(policy_problem(truth), text)
    expected = {"format": 1.0, "legal_best": 1.0, "move_value": 0.10807, "candidates": 0.94441, "eval_accuracy": 0.93333}
    assert {k: round(result.components[f"P/{k}"], 5) for k in expected} == expected
    assert round(result.total, 4) == 0.5357


# ---- the reward's properties ----------------------------------------------------------------------

def sample_positions(count: int, seed: int) -> list[str]:
    fens = []
    for board in random_game_positions(random.Random(seed), n_games=10**6):
        if not board.is_game_over():
            fens.append(board.fen())
            if len(fens) == count:
                return fens
    raise AssertionError("unreachable")


POSITIONS = [SCHOLAR, ONE_LEGAL, chess.STARTING_FEN] + sample_positions(20, seed=3)


@pytest.mark.parametrize("fen", POSITIONS)
def test_the_best_move_and_its_ties_score_the_maximum_and_every_other_move_less_monotone_in_its_loss(fen):
    rng = random.Random(fen)
    legal = [m.uci() for m in chess.Board(fen).legal_moves]
    fixed = {m: 2.5 for m in legal[:2]}  # two tied best moves where two are legal
    truth = valued_truth(fen, rng, fixed)
    top = honest(truth)
    assert total(truth, top) == 1.0
    losses = move_losses(truth)
    by_move = {m: total(truth, honest(truth, best=m)) for m in legal}
    assert {by_move[m] for m in fixed} == {1.0}
    ordered = sorted(legal, key=lambda m: losses[m])
    for better, worse in zip(ordered, ordered[1:]):
        if losses[worse] > losses[better]:
            assert by_move[worse] < by_move[better], (better, worse)
        else:
            assert by_move[worse] == by_move[better]
    illegal = total(truth, honest(truth, best="a1a8" if "a1a8" not in legal else "h8h1"))
    assert illegal < min(by_move.values())
    assert total(truth, "garbage") == total(truth, top[:60]) == -0.3 < illegal


def adversarial_answers(truth: PolicyTruth, rng: random.Random) -> dict[str, tuple[str, str]]:
    """name -> (hacked completion, the answer it pads or distorts): every hack adds content that is not
    a better move with its true value, or claims values it does not know."""
    fen = truth.fen
    ranked = sorted(truth.action_values, key=lambda c: -c.eval)
    k = min(5, len(ranked))
    moves, evals, best = [c.move for c in ranked[:k]], [format_eval(c.eval) for c in ranked[:k]], ranked[0].move
    board = chess.Board(fen)
    illegal = next((m.uci() for m in board.pseudo_legal_moves if not board.is_legal(m)), "a1a1")
    worst = ranked[-1]
    base = completion(moves, evals, best, fen)
    short = completion(moves[:1], evals[:1], best, fen)
    every = [c.move for c in ranked]
    return {
        "duplicate best": (completion(moves[:1] * 5, evals[:1] * 5, best, fen), short),
        "duplicate appended": (completion(moves + [moves[0]], evals + [evals[0]], best, fen), base),
        "illegal appended": (completion(moves + [illegal], evals + ["0.0"], best, fen), base),
        "made-up move": (completion(moves[:-1] + ["a1a2"], evals[:-1] + [evals[0]], best, fen)
                         if k > 1 else completion(moves + ["a1a2"], evals + [evals[0]], best, fen), base),
        "worst move padded": (completion(moves[:1] + [worst.move], evals[:1] + [format_eval(worst.eval)], best, fen)
                              if len(ranked) > 5 or k == 1 else completion(moves, evals, best, fen), base),
        "every legal move": (completion(every, [format_eval(c.eval) for c in ranked], best, fen), base),
        "mate claimed everywhere": (completion(moves, ["999.99"] * k, best, fen), base),
        "values inflated": (completion(moves, [format_eval(c.eval + 0.6) for c in ranked[:k]], best, fen), base),
        "best not listed": (completion(moves[1:] or [illegal], evals[1:] or ["0.0"], best, fen), base),
        "empty list": (completion([], [], best, fen), base),
        "two best moves": (base.replace(f"B: {best}", f"B: {best} {moves[-1]}"), base),
        "evals without moves": (completion(moves, evals + ["0.0"], best, fen), base),
        "shuffled values": (completion(moves, list(reversed(evals)), best, fen), base),
    }


def test_the_adversarial_suite_finds_no_hack():
    """Each hack must score below the honest answer it distorts, and below the perfect answer: 0 hacks over
    every position (random games, one-legal-move and few-legal-move positions)."""
    rng = random.Random(0)
    hacks, tried = [], 0
    for fen in POSITIONS + sample_positions(20, seed=11):
        truth = valued_truth(fen, rng)
        perfect = total(truth, honest(truth))
        for name, (hacked, answer) in adversarial_answers(truth, rng).items():
            tried += 1
            score, honest_score = total(truth, hacked), total(truth, answer)
            if hacked != answer and (score >= honest_score or score >= perfect):
                hacks.append((name, fen, score, honest_score))
    assert tried >= 500 and hacks == []


def test_padding_a_one_legal_move_answer_never_pays():
    truth = valued_truth(ONE_LEGAL, random.Random(0), {"h1g2": -9.5})
    assert total(truth, completion(["h1g2"], ["-9.5"], "h1g2", ONE_LEGAL)) == 1.0
    padded = completion(["h1g2", "a1a1", "b2b3", "c3c4", "d4d5"], ["-9.5", "0.0", "5.0", "-3.0", "7.0"], "h1g2", ONE_LEGAL)
    result = reward(policy_problem(truth), padded)
    assert result.components["P/candidates"] == pytest.approx(1 / 5)
    assert result.components["P/eval_accuracy"] == pytest.approx(1 / 5)
    assert result.total == pytest.approx(0.1 + 0.1 + 0.5 + 0.15 / 5 + 0.15 / 5)  # 0.76 against 1.0


def test_a_position_without_action_values_is_an_error_naming_it():
    truth = PolicyTruth(chess.STARTING_FEN, (Candidate("e2e4", 0.3),))
    for text in ("garbage", honest(valued_truth(chess.STARTING_FEN, random.Random(0)))):
        with pytest.raises(MissingActionValues, match=re.escape(f"the P: position {chess.STARTING_FEN!r} has no action_values")):
            reward(policy_problem(truth), text)


def test_arbiter_rewards_are_graduated_ones():
    graduated = GraduatedReward()
    for problem in (arbiter_problem(arbiter_truth(chess.STARTING_FEN, "e2e4", ["e2e4"])),
                    arbiter_problem(arbiter_truth(chess.STARTING_FEN, "e1e2", ["e1e2"]))):
        perfect = render_arbiter_completion(problem.truth)
        for text in (perfect, perfect.replace("+0+0", "+1+0"), perfect[:40], "garbage"):
            assert reward(problem, text) == graduated(problem, text)


def test_the_total_is_the_weighted_sum_of_the_components_the_weights_name():
    truth = valued_truth(SCHOLAR, random.Random(1))
    names, weights = reward.criterion_weights()
    assert names[:6] == [f"P/{c}" for c in MOVE_VALUE_CRITERIA] + ["P/malformed"]
    assert names[6:] == GraduatedReward().criterion_weights()[0][6:]
    for text in (honest(truth), honest(truth, best="a2a3", listed=2), "garbage"):
        result = reward(policy_problem(truth), text)
        parts = dict(zip(names, weights))
        assert result.total == pytest.approx(sum(parts[k] * v for k, v in result.components.items()))


@pytest.mark.parametrize("overrides, message", [
    (["reward.policy_move_value=0.6"], "reward.policy_*: the policy weights sum to 1.1, expected 1.0"),
    (["reward.loss_scale=0.0"], "reward.loss_scale=0.0: must be a number > 0"),
    (["reward.policy_candidates=-0.05", "reward.policy_eval_accuracy=0.35"],
     "reward.policy_candidates=-0.05: a weight must be a number >= 0"),
])
def test_bad_settings_fail_in_one_line(overrides, message):
    with pytest.raises(ConfigError) as error:
        load_run(compose(["reward=move_value", *overrides, "device=cpu"]))
    assert str(error.value).startswith(message) and "\n" not in str(error.value), str(error.value)


# ---- the data: action values in a P: record ---------------------------------------------------

def record(fen: str, values: list | None) -> dict:
    row = {"fen": fen, "history": [], "candidates": [{"move": "e2e4", "eval": 0.31}], "engine": "Stockfish 15.1"}
    return row | ({"action_values": values} if values is not None else {})


START_VALUES = [[m.uci(), round(0.31 - 0.02 * i, 2)] for i, m in enumerate(chess.Board().legal_moves)]


def write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_action_values_load_into_the_truth_next_to_the_candidates(tmp_path):
    path = write(tmp_path / "p.jsonl", [record(chess.STARTING_FEN, START_VALUES), record(SCHOLAR, None)])
    valued, plain = load_policy_problems("test", path)
    assert valued.truth.candidates == (Candidate("e2e4", 0.31),) == plain.truth.candidates
    assert valued.truth.move_values == {m: v for m, v in START_VALUES} and len(valued.truth.move_values) == 20
    assert plain.truth.action_values is None and plain.truth.move_values == {}


@pytest.mark.parametrize("values, message", [
    (START_VALUES + [START_VALUES[0]], "list a move more than once (1 repeated)"),
    ([["e2e4"]] + START_VALUES[1:], "action_values entry ['e2e4']: expected"),
    ([["e2e4", "0.3"]] + START_VALUES[1:], "action_values entry ['e2e4', '0.3']: expected"),
    ([[START_VALUES[0][0], float("nan")]] + START_VALUES[1:], f"{START_VALUES[0][0]} has the value nan, expected a finite"),
])
def test_bad_action_values_name_the_file_and_line(tmp_path, values, message):
    path = write(tmp_path / "bad.jsonl", [record(SCHOLAR, None), record(chess.STARTING_FEN, values)])
    with pytest.raises(ValueError, match=re.escape(f"{path}:2: ") + ".*" + re.escape(message)):
        load_policy_problems("test", path)


@pytest.mark.parametrize("values, message", [
    (START_VALUES[:-1], f"must list every legal move (missing ['{START_VALUES[-1][0]}'], not legal [])"),
    (START_VALUES + [["e1e2", 0.0]], "must list every legal move (missing [], not legal ['e1e2'])"),
])
def test_values_that_are_not_the_legal_moves_are_refused_when_first_used(tmp_path, values, message):
    """The legal-move check needs each position's legal moves: it runs when a position's values are first
    read (a reward, a metric), not for every position of a large split at load."""
    path = write(tmp_path / "bad.jsonl", [record(chess.STARTING_FEN, values)])
    truth = load_policy_problems("test", path)[0].truth
    for _ in range(2):  # and again on a second use: nothing wrong is cached
        with pytest.raises(ValueError, match=re.escape(f"action_values of {chess.STARTING_FEN!r} {message}")):
            truth.move_values


def training_data(path: str) -> BundledData:
    """data whose P: training positions are the file at `path`."""
    return BundledData(kind="bundled", policy_train=path, policy_validation=None, policy_test=None, policy_final=None,
                       arbiter_train=None, arbiter_validation=None, arbiter_test=None, arbiter_final=None,
                       arbiter_cases={"normal": 1.0},
                       arbiter_pool_size=1, arbiter_pool_walks=1, arbiter_pool_cache=None, arbiter_seed=0)


def test_a_move_value_run_names_the_data_file_whose_positions_lack_values(tmp_path):
    path = write(tmp_path / "train.jsonl", [record(chess.STARTING_FEN, START_VALUES), record(SCHOLAR, None)])
    data = training_data(path)
    problems = load_policy_problems("train", path)
    require_move_values(problems[:1], positions_of(data, "train"), "reward=move_value")
    with pytest.raises(ConfigError, match=re.escape(f"{path} has none for {SCHOLAR!r}")):
        require_move_values(problems, positions_of(data, "train"), "reward=move_value")
    with pytest.raises(ConfigError, match="the bundled test positions has none"):
        require_move_values(load_policy_problems("test")[:1], positions_of(data, "test"), "reward=move_value")


def test_a_move_value_run_refuses_values_that_are_not_the_legal_moves_before_it_starts(tmp_path):
    path = write(tmp_path / "train.jsonl", [record(chess.STARTING_FEN, START_VALUES[:-1])])
    data = training_data(path)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: action_values of {chess.STARTING_FEN!r} must list "
                                                    f"every legal move (missing ['{START_VALUES[-1][0]}']")):
        require_move_values(load_policy_problems("train", path), positions_of(data, "train"), "reward=move_value")


# ---- the held-out chess-skill metrics (rookworld/judge/evaluate.py) ---------------------------------

SCHOLAR_VALUES = {"f3f7": 999.99, "b1c3": 0.6, "c4f7": -1.2}
START_SKILL_VALUES = {"e2e4": 0.31, "d2d4": 0.29}


def hand_truth(fen: str, fixed: dict[str, float], rest: float | None) -> PolicyTruth:
    values = None if rest is None else tuple(Candidate(m.uci(), fixed.get(m.uci(), rest))
                                             for m in chess.Board(fen).legal_moves)
    best = max(fixed, key=fixed.get)
    return PolicyTruth(fen, (Candidate(best, fixed[best]),), action_values=values)


def test_the_skill_metrics_of_hand_made_completions_are_those_the_docs_define():
    """Expected values from the formulas of docs/rewards.md, worked by hand (win(+0.6) = 0.55501,
    win(+0.31) = 0.52850, win(+0.29) = 0.52667)."""
    scholar, start = hand_truth(SCHOLAR, SCHOLAR_VALUES, -2.0), hand_truth(chess.STARTING_FEN, START_SKILL_VALUES, 0.0)
    unvalued = hand_truth(SCHOLAR, SCHOLAR_VALUES, None)
    answered = [(scholar, "f3f7"), (scholar, "b1c3"), (start, "d2d4"), (start, "e1e2"), (unvalued, None)]
    rows = [score_heldout(policy_problem(truth), "garbage" if best is None else
                          completion([best], ["0.0"], best, truth.fen)) for truth, best in answered]
    metrics, notes = skill_metrics(rows)
    expected = {
        "win_prob_loss": (0 + 0.44499 + (0.52850 - 0.52667) + 0.52850) / 4,  # e1e2 is illegal: loses win(+0.31)
        "win_prob_loss_n": 4,
        "blunder": 2 / 4, "blunder_se": 0.28868,  # sd of [0, 1, 0, 1] / sqrt(4)
        "cp_loss_median": (2 + 940) / 2,  # losses 0, 1000 - 60, 31 - 29, 31 + 1000
        "mate_in_one": 1 / 3, "mate_in_one_n": 3,  # the three Scholar's-mate positions
        "only_move": 1 / 2, "only_move_n": 2,  # f3f7 (1.0) beats b1c3 (0.555) by >= 0.30: only there
        "best_move": 1 / 5, "best_move_n": 5,
    }
    assert {k: round(metrics[f"eval/P/{k}"], 4) for k in expected} == {k: round(v, 4) for k, v in expected.items()}
    assert 0 < metrics["eval/P/cp_loss_median_se"] < 1031
    assert notes == ["eval/P/win_prob_loss, eval/P/cp_loss_median, eval/P/blunder, eval/P/only_move are over the "
                     "4 of 5 held-out P: positions that have action_values"]


def test_without_action_values_the_value_metrics_are_left_out_with_a_note():
    rows = [score_heldout(policy_problem(hand_truth(SCHOLAR, SCHOLAR_VALUES, None)), completion(["f3f7"], ["0"], "f3f7", SCHOLAR))]
    metrics, notes = skill_metrics(rows)
    assert metrics == {"eval/P/best_move": 1.0, "eval/P/best_move_se": 0.0, "eval/P/best_move_n": 1.0,
                       "eval/P/mate_in_one": 1.0, "eval/P/mate_in_one_se": 0.0, "eval/P/mate_in_one_n": 1.0}
    assert len(notes) == 1 and notes[0].endswith("left out: none of the 1 held-out P: positions has action_values "
                                                 "(docs/rewards.md: the move-value data)")


def test_an_evaluation_reports_the_skill_metrics(tiny_model):
    model, tokenizer = tiny_model
    problems = [policy_problem(hand_truth(SCHOLAR, SCHOLAR_VALUES, -2.0)),
                policy_problem(hand_truth(chess.STARTING_FEN, START_SKILL_VALUES, 0.0))]
    result = evaluate(PlainDecoder(model), tokenizer, problems, MoveValueReward(), {"P": 24, "A": 24}, 2, 2,
                      score="graduated")
    for key in ("win_prob_loss", "cp_loss_median", "blunder", "mate_in_one", "only_move", "best_move"):
        assert {f"eval/P/{key}", f"eval/P/{key}_se", f"eval/P/{key}_n"} <= result.metrics.keys()
    assert result.notes == [] and result.metrics["eval/P/mate_in_one_n"] == 1.0
    assert "move_value" not in result.samples[0] and result.samples[0]["reward"] >= -0.3


def test_the_chess_score_keeps_the_win_probability_of_the_b_move_and_the_exact_next_state():
    """eval.score=chess against the formula worked by hand (docs/metrics.md): P: 1 - the win-probability
    loss of the B: move (b1c3: 1 - 0.44499; the illegal e1e2 keeps none of win(+0.31) = 0.52850), A: 1 for
    the exact next position; eval/score half of each task's mean."""
    scholar, start = hand_truth(SCHOLAR, SCHOLAR_VALUES, -2.0), hand_truth(chess.STARTING_FEN, START_SKILL_VALUES, 0.0)
    mate = arbiter_problem(arbiter_truth(SCHOLAR, "f3f7", ("f3f7",)))
    answered = [(policy_problem(scholar), completion(["b1c3"], ["0.6"], "b1c3", SCHOLAR)),
                (policy_problem(start), completion(["e1e2"], ["0.3"], "e1e2", chess.STARTING_FEN)),
                (mate, render_arbiter_completion(mate.truth)), (mate, "garbage")]
    rows = [(problem, score_heldout(problem, text)) for problem, text in answered]
    per_problem = [problem_score(problem, scored, "chess") for problem, scored in rows]
    assert per_problem == pytest.approx([1 - 0.44499, 1 - 0.52850, 1.0, 0.0], abs=1e-5)
    scores = task_scores({"eval/P/win_prob_loss": (0.44499 + 0.52850) / 2, "eval/A/next_state": 0.5}, "chess")
    assert scores["eval/score"] == pytest.approx(0.5 * (1 - (0.44499 + 0.52850) / 2) + 0.5 * 0.5)
    assert scores["eval/P/score"] == pytest.approx(sum(per_problem[:2]) / 2, abs=1e-5)  # the mean of its problems


def test_an_evaluation_under_the_chess_score_reports_it(tiny_model):
    model, tokenizer = tiny_model
    problems = [policy_problem(hand_truth(SCHOLAR, SCHOLAR_VALUES, -2.0)),
                policy_problem(hand_truth(chess.STARTING_FEN, START_SKILL_VALUES, 0.0)),
                arbiter_problem(arbiter_truth(SCHOLAR, "f3f7", ("f3f7",))),
                arbiter_problem(arbiter_truth(SCHOLAR, "b1c3", ("b1c3",)))]
    m = evaluate(PlainDecoder(model), tokenizer, problems, MoveValueReward(), {"P": 24, "A": 24}, 4, 0,
                 score="chess").metrics
    assert m["eval/P/score"] == pytest.approx(1 - m["eval/P/win_prob_loss"])
    assert m["eval/A/score"] == pytest.approx(m["eval/A/next_state"])
    assert m["eval/score"] == pytest.approx(0.5 * (m["eval/P/score"] + m["eval/A/score"]))


def test_the_chess_score_refuses_held_out_positions_without_action_values():
    spec = load_run(compose(["eval.score=chess", "data=bundled"]))
    with pytest.raises(ConfigError, match=r"^eval.score=chess needs action_values on every P: position: the "
                                          r"validation part has none for "):
        eval_problems(spec.eval, *heldout_problems("validation", spec.data), seed=0)


# ---- a training run with reward=move_value -----------------------------------------------------

def valued_records(path, count: int) -> str:
    """The first `count` bundled test positions with hand-made action values: each candidate its eval,
    every other legal move half a pawn below the worst candidate."""
    rows = read_jsonl(BUNDLED["policy_test"])[:count]
    for row in rows:
        evals = {c["move"]: c["eval"] for c in row["candidates"]}
        floor = min(evals.values()) - 0.5
        row["action_values"] = sorted(([m.uci(), evals.get(m.uci(), floor)] for m in chess.Board(row["fen"]).legal_moves),
                                      key=lambda pair: -pair[1])
    return write(path, rows)


def test_a_run_with_reward_move_value_trains_and_evaluates_on_valued_positions(tmp_path, capsys):
    train, heldout = valued_records(tmp_path / "train.jsonl", 8), valued_records(tmp_path / "heldout.jsonl", 4)
    result = run(tiny_config(tmp_path, "reward=move_value", "task_mix=policy_only", "steps=1", "eval.num_arbiter=0",
                             "grpo.reward_aggregation=normalize_then_sum", "grpo.reward_norm.enabled=false",
                             f"data.policy_train={train}", f"data.policy_validation={heldout}",
                             f"data.arbiter_train={BUNDLED['policy_train']}", "data.arbiter_pool_size=1",
                             "data.arbiter_pool_walks=500"))  # A: is not trained: the smallest stream
    assert result.outcome == "success"
    assert {"eval/P/win_prob_loss", "eval/P/cp_loss_median", "eval/P/blunder"} <= result.final_eval.keys()
    assert "eval/P/score" in result.final_eval and "eval/A/score" not in result.final_eval  # no A: problem: no score
    assert "eval note" not in capsys.readouterr().out


def test_a_run_with_reward_move_value_on_positions_without_values_fails_before_the_model_loads(tmp_path):
    with pytest.raises(ConfigError, match="reward=move_value needs action_values on every P: position: the bundled "
                                          "train positions has none for"):
        build_run(load_run(tiny_config(tmp_path, "reward=move_value")), make_tracker(tiny_config(tmp_path)))
