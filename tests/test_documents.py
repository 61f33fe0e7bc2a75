"""The SFT document stream's cheaper parts give today's documents: move cases, A: truths and token ids
checked against python-chess and the tokenizer themselves; several A: documents per position keep
each document's distribution."""
import collections
import itertools
import random

import pytest
from scipy.stats import chi2_contingency

from rookworld.data.documents import ArbiterCases, encode_document
from rookworld.data.move_cases import (legal_move_case, legal_move_case_in, move_case, random_game_positions,
                                       with_seventyfive_clock)
from rookworld.data.positions import load_arbiter_problems, load_policy_problems
from rookworld.data.word_cache import WordCache
from rookworld.model.tokenizer import ChessTokenizer
from rookworld.tasks import arbiter_truth, perfect_completion

CASES = {"normal": 4.0, "castling": 0.5, "en_passant": 0.5, "promotion": 0.5, "checkmate": 0.7, "stalemate": 0.3,
         "insufficient": 0.3, "seventyfive_moves": 0.05, "illegal": 1.5}  # conf/sft.yaml's


def arbiter_problems(n: int, docs_per_position: int, seed: int = 0):
    cases, rng = ArbiterCases(CASES, set(), docs_per_position), random.Random(seed)
    problems = cases.problems(random_game_positions(rng, n_games=10**9), rng)
    return list(itertools.islice(filter(None, problems), n))


def test_the_one_probe_move_case_is_python_chess_s_case():
    seen = collections.Counter()
    for board in itertools.islice(random_game_positions(random.Random(1), n_games=10**6), 600):
        for position in (board, with_seventyfive_clock(board)):
            insufficient_now = position.is_insufficient_material()
            for move in position.legal_moves:
                case = legal_move_case_in(position, move, insufficient_now)
                assert case == legal_move_case(position, move), (position.fen(), move.uci())
                seen[case] += 1
    assert {"checkmate", "stalemate", "insufficient", "seventyfive_moves", "promotion", "castling"} <= set(seen)


def test_a_truth_from_the_case_is_arbiter_truth():
    problems = arbiter_problems(600, 1)
    for problem in problems:
        t = problem.truth
        assert t == arbiter_truth(t.fen, t.move, t.history)
    kinds = {move_case(p.truth.fen, p.truth.move) for p in problems}
    assert {"normal", "illegal", "checkmate", "promotion", "castling"} <= kinds


@pytest.mark.parametrize("tokenizer_name", ["tiny", "gpt2"])
def test_the_word_cache_gives_the_tokenizer_s_ids_and_completion_starts(tiny_tokenizer, tokenizer_name):
    tokenizer = tiny_tokenizer if tokenizer_name == "tiny" else gpt2_style(tiny_tokenizer)
    words = WordCache(tokenizer.tokenizer)
    problems = load_policy_problems("train")[:150] + load_arbiter_problems("validation")[:150]
    texts = [(p.prompt_text, perfect_completion(p)) for p in problems] + [("a\n  b", " c\t\td"), ("é  x", "  ")]
    for prompt, completion in texts:
        for loss_on in ("document", "completion"):
            assert (encode_document(tokenizer, prompt, completion, 320, loss_on, words)
                    == encode_document(tokenizer, prompt, completion, 320, loss_on)), (prompt, completion)
    assert 100 < len(words.words) < 3000


def gpt2_style(tiny_tokenizer) -> ChessTokenizer:
    """The tiny tokenizer's vocabulary behind GPT-2's own pre-tokenizer (RookWorld-LM's kind)."""
    from tokenizers import pre_tokenizers
    tokenizer = ChessTokenizer.tiny()
    tokenizer.tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    assert WordCache(tokenizer.tokenizer).pattern.pattern.startswith("'s")
    return tokenizer


def group(case: str) -> str:
    """Rare cases pooled: a position's documents share its rare moves, so they come in clusters."""
    return case if case in ("normal", "illegal") else "rare"


def test_several_documents_a_position_keep_each_document_s_distribution():
    """k = 4 transitions from each position: the move cases (python-chess's verdict on each document's
    move) come as often as with one, from a quarter of the positions."""
    one, four = arbiter_problems(2000, 1, seed=2), arbiter_problems(2000, 4, seed=3)
    counts = [collections.Counter(group(move_case(p.truth.fen, p.truth.move)) for p in part) for part in (one, four)]
    cases = sorted(set(counts[0]) | set(counts[1]))
    table = [[c[case] for case in cases] for c in counts]
    p_value = chi2_contingency(table).pvalue
    print(dict(zip(cases, zip(*table))), f"p = {p_value:.3f}")
    assert p_value > 0.01
    assert len({p.truth.fen for p in four}) <= len(four) / 3 < len({p.truth.fen for p in one}) / 2


def test_the_worker_benchmark_checks_the_same_documents_and_prints_each_stream(capsys):
    from rookworld.bench.document_workers import main
    main(["--before", "HEAD", "--docs", "20", "--repeats", "1", "sft.arbiter_docs_per_position=2",
          "sft.arbiter_fraction=0.5"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[1].strip() for line in lines] == ["share 1.0", "share 0.5"]
    assert all("the same 20 documents as HEAD" in line and "now, 2 A: a position" in line for line in lines)
