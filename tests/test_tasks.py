"""P: and A: task formats (docs/tasks.md) and python-chess ground truth, hand-checked."""
import random

import chess
import pytest

from rookworld.tasks import (
    ArbiterTruth,
    Candidate,
    PolicyTruth,
    Problem,
    arbiter_problem,
    arbiter_problem_from_game,
    arbiter_prompt,
    arbiter_truth,
    parse_arbiter,
    parse_policy,
    policy_problem,
    policy_prompt,
    render_arbiter_completion,
    render_policy_completion,
)

START = chess.STARTING_FEN

# tasks.md, verbatim (dataset row: B: is the lowest-ranked candidate, the Black-label defect).
P_EXAMPLE = ("P: r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6                          "
             "M: c6d5 a6b4 c8d7 a6c7 a6b8      E: -2.0 -2.07 -2.92 -2.79 -2.66            B: c8d7")
P_EXAMPLE_FEN = "r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6"
A_EXAMPLE_PROMPT = "A: rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1+e2e4+e2e4+"
A_EXAMPLE_COMPLETION = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1+0.001+0+0"

# Same five moves and evals as the example, in dataset order.
EXAMPLE_ORDER = (("c6d5", -2.0), ("a6b4", -2.07), ("c8d7", -2.92), ("a6c7", -2.79), ("a6b8", -2.66))


def ranked_example_truth() -> PolicyTruth:
    ranked = sorted(EXAMPLE_ORDER, key=lambda c: -c[1])  # Black to move: highest eval is best
    return PolicyTruth(P_EXAMPLE_FEN, tuple(Candidate(m, e) for m, e in ranked))


# ---- P: ------------------------------------------------------------------------------------------

def test_policy_example_row_parses():
    for text in (P_EXAMPLE, P_EXAMPLE[len(policy_prompt(P_EXAMPLE_FEN)):]):
        answer = parse_policy(text)
        assert answer.moves == ["c6d5", "a6b4", "c8d7", "a6c7", "a6b8"]
        assert answer.evals == [-2.0, -2.07, -2.92, -2.79, -2.66]
        assert answer.best_move == "c8d7"


def test_policy_render_matches_example_layout_with_true_best_move():
    truth = PolicyTruth(P_EXAMPLE_FEN, tuple(Candidate(m, e) for m, e in EXAMPLE_ORDER))
    document = policy_prompt(truth.fen) + render_policy_completion(truth)
    assert document == P_EXAMPLE.replace("B: c8d7", "B: c6d5")


def test_policy_completion_is_the_document_after_the_prompt():
    completion = render_policy_completion(ranked_example_truth())
    assert completion.startswith(" " * (90 - len(P_EXAMPLE_FEN)) + "M: ")
    assert not completion.endswith("\n")
    assert len(policy_prompt(P_EXAMPLE_FEN) + completion) == 3 + 90 + 3 + 30 + 3 + 40 + 3 + 4


def test_black_to_move_best_move_is_rank_one_not_the_dataset_label():
    truth = ranked_example_truth()
    assert truth.best_move == "c6d5"
    assert parse_policy(P_EXAMPLE).best_move != truth.best_move
    assert render_policy_completion(truth).endswith("B: c6d5")


def test_policy_shuffle_keeps_move_eval_pairs_and_best_move():
    truth = ranked_example_truth()
    answer = parse_policy(render_policy_completion(truth, shuffle_rng=random.Random(3)))
    assert dict(zip(answer.moves, answer.evals)) == dict(EXAMPLE_ORDER)
    assert answer.best_move == "c6d5"


def test_policy_evals_written_rounded_to_two_decimals():
    truth = PolicyTruth(START, (Candidate("e2e4", 0.3), Candidate("a2a3", -0.1234), Candidate("h2h4", 999.85)))
    assert "E: 0.3 -0.12 999.85 " in render_policy_completion(truth)


def test_policy_problem():
    problem = policy_problem(ranked_example_truth())
    assert problem == Problem("P", "P: " + P_EXAMPLE_FEN, ranked_example_truth())


@pytest.mark.parametrize("text, expected", [
    ("M: e2e4 E: 0.3 B: e2e4", (["e2e4"], [0.3], "e2e4")),
    ("\n M:e2e4\tE:\n0.3B:e2e4 \n", (["e2e4"], [0.3], "e2e4")),
    ("M: e2e4 d2d4 E: 0.3 zero B: e2e4", (["e2e4", "d2d4"], [], "e2e4")),      # unparsable eval
    ("M: e2e4 E: nan B: e2e4", (["e2e4"], [], "e2e4")),                         # NaN is invalid
    ("M: e2e4 E: 0.3 B: e2e4 d2d4", (["e2e4"], [0.3], None)),                   # two best moves
    ("M: E: B:", ([], [], None)),
])
def test_parse_policy_fields(text, expected):
    answer = parse_policy(text)
    assert (answer.moves, answer.evals, answer.best_move) == expected


@pytest.mark.parametrize("text", ["", "hello", "M: e2e4 E: 0.3", "E: 0.3 M: e2e4 B: e2e4", "B: e2e4"])
def test_parse_policy_missing_labels_is_none(text):
    assert parse_policy(text) is None


def test_policy_truth_needs_candidates():
    with pytest.raises(ValueError):
        PolicyTruth(START, ())


# ---- A: ------------------------------------------------------------------------------------------

def test_arbiter_example_prompt_and_completion():
    truth = arbiter_truth(START, "e2e4", ["e2e4"])
    assert arbiter_prompt(START, "e2e4", ["e2e4"]) == A_EXAMPLE_PROMPT
    assert arbiter_problem(truth).prompt_text == A_EXAMPLE_PROMPT
    assert render_arbiter_completion(truth) == A_EXAMPLE_COMPLETION
    answer = parse_arbiter(A_EXAMPLE_COMPLETION)
    assert answer.next_fen == "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
    assert (answer.reward, answer.terminated, answer.truncated) == (0.001, 0, 0)


def transition(fen, move, history=None):
    truth = arbiter_truth(fen, move, history or [move])
    return truth.next_fen, truth.reward, int(truth.terminated), int(truth.truncated)


# Every expected FEN below was worked out by hand.
@pytest.mark.parametrize("name, fen, move, expected", [
    ("e4: no ep square when no capture is possible", START, "e2e4",
     ("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1", 0.001, 0, 0)),
    ("white castles kingside", "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", "e1g1",
     ("r3k2r/8/8/8/8/8/8/R4RK1 b kq - 1 1", 0.001, 0, 0)),
    ("black castles queenside", "r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1", "e8c8",
     ("2kr3r/8/8/8/8/8/8/R3K2R w KQ - 1 2", 0.001, 0, 0)),
    ("f5 next to e5: ep square shown because exf6 is legal",
     "rnbqkbnr/ppp1pppp/8/3pP3/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 2", "f7f5", ("rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3", 0.001, 0, 0)),
    ("en passant capture", "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3", "e5f6",
     ("rnbqkbnr/ppp1p1pp/5P2/3p4/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 3", 0.001, 0, 0)),
    ("promotion to queen", "8/P7/8/8/8/8/8/1k5K w - - 0 1", "a7a8q",
     ("Q7/8/8/8/8/8/8/1k5K b - - 0 1", 0.001, 0, 0)),
    ("underpromotion to rook", "8/P7/8/8/8/8/8/1k5K w - - 0 1", "a7a8r",
     ("R7/8/8/8/8/8/8/1k5K b - - 0 1", 0.001, 0, 0)),
    ("underpromotion to knight: K+N vs K is insufficient material", "8/P7/8/8/8/8/8/1k5K w - - 0 1", "a7a8n",
     ("N7/8/8/8/8/8/8/1k5K b - - 0 1", 0.5, 1, 0)),
    ("fool's mate", "rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2", "d8h4",
     ("rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3", 1.0, 1, 0)),
    ("stalemate", "k7/8/2K5/8/8/8/8/1Q6 w - - 0 1", "b1b6",
     ("k7/8/1QK5/8/8/8/8/8 b - - 1 1", 0.5, 1, 0)),
    ("insufficient material: K takes the last rook", "k7/8/8/8/8/8/1r6/K7 w - - 0 1", "a1b2",
     ("k7/8/8/8/8/8/1K6/8 b - - 0 1", 0.5, 1, 0)),
    ("75-move rule (is_game_over default)", "k7/8/8/8/8/8/8/K6R w - - 149 100", "h1h2",
     ("k7/8/8/8/8/8/7R/K7 b - - 150 100", 0.5, 1, 0)),
    ("illegal: king onto its own pawn keeps the position", START, "e1e2", (START, -1.0, 0, 1)),
    ("illegal: queen onto its own pawn", START, "d1d2", (START, -1.0, 0, 1)),
    ("illegal: move from an empty square", START, "e3e4", (START, -1.0, 0, 1)),
    ("illegal: unparsable UCI", START, "zz99", (START, -1.0, 0, 1)),
    ("illegal: black move with white to move", START, "e7e5", (START, -1.0, 0, 1)),
])
def test_arbiter_transitions(name, fen, move, expected):
    assert transition(fen, move) == expected


def test_arbiter_render_of_checkmate_and_illegal():
    mate = arbiter_truth("rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2", "d8h4",
                         ["f2f3", "e7e5", "g2g4", "d8h4"])
    assert render_arbiter_completion(mate) == "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3+1.0+1+0"
    illegal = arbiter_truth(START, "e1e2", ["e1e2"])
    assert render_arbiter_completion(illegal) == START + "+-1.0+0+1"


@pytest.mark.parametrize("history", [[], ["e2e4", "e7e5"], ["e7e5"], [f"a{i}a{i}" for i in range(10)] + ["e2e4"]])
def test_arbiter_history_must_end_with_move_and_hold_at_most_ten(history):
    with pytest.raises(ValueError):
        arbiter_truth(START, "e2e4", history)


def test_arbiter_problem_from_game_uses_last_ten_moves():
    board = chess.Board()
    moves = ["e2e4", "e7e5", "g1f3", "b8c6", "f1b5", "a7a6", "b5a4", "g8f6", "e1g1", "f8e7", "f1e1", "b7b5"]
    for move in moves:
        board.push_uci(move)
    problem = arbiter_problem_from_game(board, "a4b3")
    assert problem.truth.history == tuple(moves[-9:] + ["a4b3"])
    assert problem.prompt_text == f"A: {board.fen()}+a4b3+{' '.join(moves[-9:])} a4b3+"
    assert len(board.move_stack) == len(moves)  # the caller's board is untouched


def test_arbiter_problem_from_game_sees_fivefold_repetition():
    board = chess.Board()
    shuffle = ["g1f3", "g8f6", "f3g1", "f6g8"] * 4
    for move in shuffle[:-1]:
        board.push_uci(move)
    from_game = arbiter_problem_from_game(board, "f6g8").truth
    assert (from_game.next_fen, from_game.reward, from_game.terminated) == (START.replace("0 1", "16 9"), 0.5, True)
    from_fen = arbiter_truth(board.fen(), "f6g8", from_game.history)
    assert (from_fen.reward, from_fen.terminated) == (0.001, False)


@pytest.mark.parametrize("text, expected", [
    (" " + A_EXAMPLE_COMPLETION + " \n", ("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1", 0.001, 0, 0)),
    ("x+abc+2+", ("x", None, None, None)),
    ("x+inf+1+0", ("x", None, 1, 0)),
])
def test_parse_arbiter_fields(text, expected):
    answer = parse_arbiter(text)
    assert (answer.next_fen, answer.reward, answer.terminated, answer.truncated) == expected


@pytest.mark.parametrize("text", ["", "garbage", "a+b+c", "a+b+c+d+e", A_EXAMPLE_PROMPT + A_EXAMPLE_COMPLETION])
def test_parse_arbiter_wrong_field_count_is_none(text):
    assert parse_arbiter(text) is None


def test_problem_rejects_mismatched_truth():
    truth = ArbiterTruth(START, "e2e4", ("e2e4",), START, 0.001, False, False)
    with pytest.raises(ValueError):
        Problem("P", "P: " + START, truth)
    with pytest.raises(ValueError):
        Problem("X", "X: " + START, truth)


def test_history_with_move_keeps_the_last_ten():
    from rookworld.tasks import history_with_move

    assert history_with_move([], "e2e4") == ["e2e4"]
    assert history_with_move([str(i) for i in range(12)], "m") == [str(i) for i in range(3, 12)] + ["m"]


def test_eval_mae_counts_a_repeated_move_once() -> None:
    from rookworld.tasks.policy import PolicyAnswer, eval_mae

    truth = PolicyTruth(fen=chess.STARTING_FEN, candidates=(Candidate("e2e4", 0.3), Candidate("d2d4", 0.2)))
    repeated = PolicyAnswer(moves=["e2e4", "e2e4", "e2e4", "d2d4"], evals=[0.3, 5.0, 5.0, 1.2], best_move="e2e4")
    assert eval_mae(truth, repeated) == pytest.approx((0.0 + 1.0) / 2)  # each move once, with its first E: value
