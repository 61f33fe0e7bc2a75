"""Reward levels on hand-built completions in the exact task formats (docs/tasks.md)."""
import random
from pathlib import Path

import chess
import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from rookworld.data.move_cases import random_game_positions
from rookworld.app.config import compose, load_run
from rookworld.judge.rewards import ExactReward, GraduatedReward, MoveValueReward, RewardResult
from rookworld.specs.rules import ConfigError
from rookworld.tasks.policy import MAX_CANDIDATES, format_eval
from rookworld.tasks import (
    Candidate,
    PolicyTruth,
    arbiter_problem,
    arbiter_truth,
    policy_problem,
    render_arbiter_completion,
    render_policy_completion,
)

CONF = Path(__file__).resolve().parents[1] / "conf" / "reward"
START = chess.STARTING_FEN
BLACK_FEN = "r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6"
# Engine ranking for Black (best first); the dataset row lists them shuffled with B: c8d7, the worst.
BLACK_TRUTH = PolicyTruth(BLACK_FEN, (Candidate("c6d5", -2.0), Candidate("a6b4", -2.07), Candidate("a6b8", -2.66),
                                      Candidate("a6c7", -2.79), Candidate("c8d7", -2.92)))
DATASET_COMPLETION = ("                          M: c6d5 a6b4 c8d7 a6c7 a6b8      "
                      "E: -2.0 -2.07 -2.92 -2.79 -2.66            B: c8d7")
WHITE_TRUTH = PolicyTruth(START, (Candidate("e2e4", 0.3), Candidate("d2d4", 0.3), Candidate("g1f3", 0.25),
                                  Candidate("c2c4", 0.2), Candidate("e2e3", 0.15)))
E4_NEXT = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"

graduated = GraduatedReward()
exact = ExactReward()


def p_completion(moves: list[str], evals: list[str], best: str, fen: str = BLACK_FEN) -> str:
    """A completion in the exact P: layout (fields padded to 90/30/40 columns)."""
    return (" " * (90 - len(fen)) + "M: " + " ".join(moves).ljust(30) + "E: " + " ".join(evals).ljust(40)
            + "B: " + best)


def p_score(completion: str, reward=graduated, truth: PolicyTruth = BLACK_TRUTH) -> RewardResult:
    return reward(policy_problem(truth), completion)


# ---- P: graduated levels ------------------------------------------------------------------------

@pytest.mark.parametrize("truth", [BLACK_TRUTH, WHITE_TRUTH])
@pytest.mark.parametrize("reward", [graduated, exact])
def test_policy_perfect_completion_scores_one(truth, reward):
    for rng in (None, random.Random(0), random.Random(1)):
        result = p_score(render_policy_completion(truth, shuffle_rng=rng), reward, truth)
        assert result.total == 1.0


@pytest.mark.parametrize("completion, total", [
    ("garbage", -0.3),
    ("                          M: c6d5 a6b4      E: -2.0 -2.07", -0.3),              # truncated before B:
    ("M: E: B:", 0.0),                                                              # parses, nothing right
    (p_completion(["h2h4"], ["0.5"], "h2h4"), 0.1),                                 # format only (illegal B)
    (p_completion(["e7e6"], ["-3.0"], "e7e6"), 0.2),                                # + legal, wrong best
    (DATASET_COMPLETION, 0.6),                                                      # all but the best move
    (p_completion(["c6d5", "a6b4", "a6b8", "a6c7", "c8d7"], ["5.0"] * 5, "c6d5"), 0.8),  # evals all wrong
    (p_completion(["c6d5", "a6b4", "a6b8", "a6c7", "c8d7"],
                  ["-1.5", "-1.57", "-2.16", "-2.29", "-2.42"], "c6d5"), 0.9),      # evals 0.5 off
    (p_completion(["c6d5", "a6c7", "e7e6"], ["-2.0", "-2.79", "-3.0"], "c6d5"),
     0.1 + 0.1 + 0.4 + 0.2 * 2 / 5 + 0.2 * 2 / 3),                                 # e7e6 is no candidate
    ("M: E: B: c6d5", 0.5),                                                         # best only, no fields
])
def test_policy_graduated_levels(completion, total):
    assert p_score(completion).total == pytest.approx(total)


def test_policy_components_name_each_criterion():
    result = p_score(DATASET_COMPLETION)
    assert result.components == {"P/malformed": 0.0, "P/format": 1.0, "P/legal_best": 1.0, "P/best_move": 0.0,
                                 "P/top5": 1.0, "P/eval_accuracy": 1.0}
    assert p_score("garbage").components["P/malformed"] == 1.0


def test_policy_top5_counts_only_the_first_five_moves():
    moves = ["h2h4", "h2h3", "c6d5", "a6b4", "a6b8", "a6c7", "c8d7"]
    result = p_score(p_completion(moves, ["0.0"] * 7, "c6d5"))
    assert result.components["P/format"] == 0.0
    assert result.components["P/top5"] == pytest.approx(3 / 5)


def test_policy_eval_accuracy_needs_one_eval_per_move():
    result = p_score(p_completion(["c6d5", "a6b4"], ["-2.0"], "c6d5"))
    assert (result.components["P/format"], result.components["P/eval_accuracy"]) == (0.0, 0.0)


def test_policy_eval_scale_is_configurable():
    completion = p_completion(["c6d5"], ["-1.0"], "c6d5")  # 1 pawn off
    assert GraduatedReward(eval_scale=4.0)(policy_problem(BLACK_TRUTH), completion).components[
        "P/eval_accuracy"] == pytest.approx(0.75)
    assert p_score(completion).components["P/eval_accuracy"] == 0.0


# ---- P: only correct content pays (docs/rewards.md) ---------------------------------------------

ONE_LEGAL_FEN = "8/2k2p2/6b1/8/2P2p2/2P3p1/8/4q2K w - - 0 69"  # only h1g2 is legal


def test_padding_a_one_legal_move_answer_scores_less_than_the_correct_one():
    truth = PolicyTruth(ONE_LEGAL_FEN, (Candidate("h1g2", -9.5),))
    assert [m.uci() for m in chess.Board(ONE_LEGAL_FEN).legal_moves] == ["h1g2"]
    correct = p_score(p_completion(["h1g2"], ["-9.5"], "h1g2", ONE_LEGAL_FEN), truth=truth)
    padded = p_score(p_completion(["h1g2", "a1a1", "b2b3", "c3c4", "d4d5"], ["-999.96", "0.0", "5.0", "-3.0", "7.0"],
                                  "h1g2", ONE_LEGAL_FEN), truth=truth)
    assert correct.total == 1.0
    assert padded.total < correct.total and padded.total <= 0.68
    assert padded.components["P/top5"] == pytest.approx(1 / 5)


def few_legal_move_positions(count: int, seed: int = 0) -> list[chess.Board]:
    """Positions with 1-4 legal moves, from seeded biased random games (random endgames included)."""
    found: list[chess.Board] = []
    for board in random_game_positions(random.Random(seed), n_games=10**6):
        if 1 <= board.legal_moves.count() <= 4 and not board.is_game_over():
            found.append(board.copy(stack=False))
            if len(found) == count:
                return found
    raise AssertionError("unreachable")


def wrong_variants(truth: PolicyTruth, board: chess.Board, rng: random.Random) -> list[tuple[list[str], list[str], str]]:
    """(moves, evals, best) answers that differ from the truth by padding or a wrong field."""
    moves = [c.move for c in truth.candidates]
    evals = [format_eval(c.eval) for c in truth.candidates]
    best = truth.best_move
    illegal = next(m.uci() for m in chess.Board(truth.fen).pseudo_legal_moves if m not in board.legal_moves) \
        if any(m not in board.legal_moves for m in board.pseudo_legal_moves) else "a1a1"
    variants = [
        (moves + [moves[0]], evals + [evals[0]], best),               # a duplicate
        (moves + [illegal], evals + ["0.0"], best),                    # an illegal move
        (moves + ["a1a2"], evals + [evals[0]], best),                  # a made-up move with a copied eval
        (moves[:-1], evals[:-1], best) if len(moves) > 1 else (moves, ["5.0"], best),  # a candidate missing
        (moves, [format_eval(truth.candidates[0].eval + 0.5)] + evals[1:], best),  # an eval off
    ]
    weaker = [m for m in (m.uci() for m in board.legal_moves) if m not in truth.best_moves]
    if weaker:
        variants.append((moves, evals, rng.choice(weaker)))           # a wrong best move
    assert all(len(m) <= MAX_CANDIDATES for m, _, _ in variants)  # at most 4 legal moves + 1 padding
    return variants


def test_correct_answers_score_the_maximum_and_every_padding_strictly_less():
    rng = random.Random(0)
    for board in few_legal_move_positions(40):
        legal = [m.uci() for m in board.legal_moves]
        evals = sorted((round(rng.uniform(-5, 5), 2) for _ in legal), reverse=True)
        truth = PolicyTruth(board.fen(), tuple(Candidate(m, e) for m, e in zip(rng.sample(legal, len(legal)), evals)))
        problem = policy_problem(truth)
        for order in (None, rng):
            assert graduated(problem, render_policy_completion(truth, shuffle_rng=order)).total == 1.0
        for moves, evals_text, best in wrong_variants(truth, board, rng):
            total = graduated(problem, p_completion(moves, evals_text, best, truth.fen)).total
            assert total < 1.0, (truth, moves, evals_text, best)


def test_every_move_tying_the_top_eval_is_credited_as_best():
    assert WHITE_TRUTH.best_moves == {"e2e4", "d2d4"}
    for best in ("e2e4", "d2d4"):
        completion = p_completion(["e2e4", "d2d4", "g1f3", "c2c4", "e2e3"], ["0.3", "0.3", "0.25", "0.2", "0.15"],
                                  best, START)
        assert p_score(completion, truth=WHITE_TRUTH).total == 1.0
        assert p_score(completion, exact, WHITE_TRUTH).total == 1.0
    wrong = p_completion(["e2e4", "d2d4", "g1f3", "c2c4", "e2e3"], ["0.3", "0.3", "0.25", "0.2", "0.15"], "g1f3", START)
    assert p_score(wrong, truth=WHITE_TRUTH).components["P/best_move"] == 0.0


# ---- P: ground truth is the engine's rank-1 move --------------------------------------------------

def test_black_best_move_is_rank_one_not_dataset_label():
    assert p_score(DATASET_COMPLETION).components["P/best_move"] == 0.0
    assert p_score(DATASET_COMPLETION.replace("B: c8d7", "B: c6d5")).components["P/best_move"] == 1.0
    assert p_score(DATASET_COMPLETION, exact).total == 0.0
    assert p_score(DATASET_COMPLETION.replace("B: c8d7", "B: c6d5"), exact).total == 1.0


def test_legal_but_wrong_best_scores_less_than_perfect():
    perfect = p_score(render_policy_completion(BLACK_TRUTH)).total
    wrong_best = p_score(render_policy_completion(BLACK_TRUTH).replace("B: c6d5", "B: a6b4")).total
    assert wrong_best < perfect == 1.0


# ---- P: exact -----------------------------------------------------------------------------------

@pytest.mark.parametrize("completion, total", [
    ("garbage", 0.0),
    (p_completion(["e7e6"], ["-3.0"], "e7e6"), 0.0),
    ("M: E: B: c6d5", 1.0),   # exact scores only the best move
])
def test_policy_exact(completion, total):
    assert p_score(completion, exact).total == total


def test_exact_malformed_penalty_is_configurable():
    assert p_score("garbage", ExactReward(malformed_penalty=-0.5)).total == -0.5
    assert p_score("garbage", GraduatedReward(malformed_penalty=-1.0)).total == -1.0


# ---- A: -----------------------------------------------------------------------------------------

E4 = arbiter_problem(arbiter_truth(START, "e2e4", ["e2e4"]))
ILLEGAL = arbiter_problem(arbiter_truth(START, "e1e2", ["e1e2"]))
MATE = arbiter_problem(arbiter_truth("rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2", "d8h4",
                                     ["f2f3", "e7e5", "g2g4", "d8h4"]))


@pytest.mark.parametrize("problem", [E4, ILLEGAL, MATE])
@pytest.mark.parametrize("reward", [graduated, exact])
def test_arbiter_perfect_completion_scores_one(problem, reward):
    assert reward(problem, render_arbiter_completion(problem.truth)).total == 1.0


def test_arbiter_tasks_md_example_scores_one():
    completion = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1+0.001+0+0"
    assert graduated(E4, completion).total == exact(E4, completion).total == 1.0


@pytest.mark.parametrize("problem, completion, total", [
    (E4, "garbage", -0.3),
    (E4, E4_NEXT + "+0.001+0", -0.3),                     # three fields
    (E4, START + "+1.0+1+1", 0.1),                        # format only
    (E4, "notafen+0.001+0+0", 0.3),                      # flags right, FEN unparsable
    (E4, "8/8/8/8/8/8/8/8+0.001+0+0", 0.3),              # board part only: not a six-field FEN
    (E4, E4_NEXT + "+1.0+1+1", 0.7),                      # next state right, the rest wrong
    (E4, E4_NEXT + "+0.5+0+0", 0.9),                      # all but the reward
    (E4, E4_NEXT + "+0.42+0+0", 0.8),                     # not a task reward: format and reward lost
    # the published data's corrupted "legal" transition for an illegal move: format + terminated
    (ILLEGAL, "rnbqkbnr/pppppppp/8/8/8/8/PPPPKPPP/RNBQ1BNR b kq - 1 1+0.001+0+0", 0.2),
    (MATE, "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3+0.001+0+0", 0.8),
])
def test_arbiter_graduated_levels(problem, completion, total):
    assert graduated(problem, completion).total == pytest.approx(total)


def test_arbiter_components_and_exact():
    completion = E4_NEXT + "+0.5+0+0"
    assert graduated(E4, completion).components == {"A/malformed": 0.0, "A/format": 1.0, "A/next_state": 1.0,
                                                    "A/reward": 0.0, "A/terminated": 1.0, "A/truncated": 1.0}
    assert exact(E4, completion).total == 0.0
    assert exact(E4, "garbage").total == 0.0


# ---- configuration ------------------------------------------------------------------------------

@pytest.mark.parametrize("overrides, message", [
    (["reward.policy_best_move=-0.1"], "reward.policy_best_move=-0.1: a weight must be a number >= 0"),
    (["reward.policy_best_move=0.5"], "reward.policy_*: the policy weights sum to 1.1, expected 1.0"),
    (["reward.arbiter_next_state=0.5"], "reward.arbiter_*: the arbiter weights sum to 0.9, expected 1.0"),
    (["reward.arbiter_reward=nan"], "reward.arbiter_reward=nan: a weight must be a number >= 0"),
    (["reward.malformed_penalty=0.3"], "reward.malformed_penalty=0.3: must be in [-1, 0]"),
    (["reward.eval_scale=0.0"], "reward.eval_scale=0.0: must be a number > 0"),
    (["reward=exact", "reward.malformed_penalty=-2.0"], "reward.malformed_penalty=-2.0: must be in [-1, 0]"),
])
def test_the_reward_spec_refuses_bad_settings_in_one_line(overrides, message):
    """The spec checks the settings when the config loads, before any model or data (the scorer trusts them)."""
    with pytest.raises(ConfigError) as error:
        load_run(compose([*overrides, "device=cpu"]))
    assert str(error.value).startswith(message) and "\n" not in str(error.value), str(error.value)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name, cls", [("graduated", GraduatedReward), ("exact", ExactReward),
                                       ("move_value", MoveValueReward)])
def test_yaml_instantiates_with_class_defaults(name, cls):
    reward = instantiate(OmegaConf.load(CONF / f"{name}.yaml")).build()
    assert type(reward) is cls and {k: vars(v) if isinstance(v, GraduatedReward) else v for k, v in vars(reward).items()} \
        == {k: vars(v) if isinstance(v, GraduatedReward) else v for k, v in vars(cls()).items()}


@pytest.mark.parametrize("name", ["graduated", "exact", "move_value"])
def test_yaml_comments_every_setting(name):
    lines = (CONF / f"{name}.yaml").read_text().splitlines()
    settings = [line for line in lines if line and not line.startswith(("#", "_target_"))]
    assert settings and all("#" in line for line in settings)
