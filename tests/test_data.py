"""Bundled data, loaders, the task-mix sampler, the annotate CLI and the rookworld_7m loader."""

from __future__ import annotations

import json
import os
import random
import re
from collections import Counter
from functools import partial
from pathlib import Path

import chess
import pytest
from omegaconf import OmegaConf

from rookworld import final_pool
from rookworld.commands import annotate
from rookworld.commands.load_time import load_files_uncached, start_arbiter_stream_uncached
from rookworld.data.records import HELD_OUT_SPLITS, position_key, read_jsonl
from rookworld.run.build import eval_problems
from rookworld.app.config import spec_of
from rookworld.data.arbiter_stream import case_counts
from rookworld.data import rookworld7m
from rookworld.data.move_cases import illegal_moves, move_case, random_endgame_board
from rookworld.data.phase import game_phase
from rookworld.data.positions import (
    BUNDLED,
    arbiter_training_stream,
    ProblemSampler,
    load_arbiter_problems,
    load_policy_problems,
)
from rookworld.data.rookworld7m import DatasetUnavailableError, load_rookworld7m
from rookworld.specs.eval import Eval
from rookworld.specs.rules import ConfigError
from rookworld.tasks import ArbiterTruth, PolicyTruth

STOCKFISH = "/usr/games/stockfish"
needs_stockfish = pytest.mark.skipif(not os.access(STOCKFISH, os.X_OK), reason="needs Stockfish")
CONF = Path(__file__).resolve().parents[1] / "conf"


# -- bundled files ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_bundled_split_loads() -> None:
    """Load time is measured by `python -m rookworld.commands.load_time` (a benchmark, not a timed test)."""
    _, counts = load_files_uncached()
    assert counts["P: train"] >= 5000
    assert counts["P: validation"] + counts["P: test"] >= 3000 and counts["A: validation"] + counts["A: test"] >= 3000
    assert min(counts[f"{task}: {split}"] for task in "PA" for split in HELD_OUT_SPLITS) >= 1000
    assert start_arbiter_stream_uncached()[2] > 0


def policy_files() -> dict[str, list[dict]]:
    return {split: read_jsonl(BUNDLED[f"policy_{split}"]) for split in ("train", *HELD_OUT_SPLITS)}  # no final pool


def test_every_shipped_policy_row_is_legal_distinct_and_complete() -> None:
    """Each P: row: legal, distinct candidates, as many as the position allows (5 or all its legal
    moves), labelled at the limit of conf/engine/stockfish.yaml, history of at most 10 moves."""
    nodes = OmegaConf.load(CONF / "engine" / "stockfish.yaml").nodes
    for split, records in policy_files().items():
        assert {r["phase"] for r in records} == {"opening", "middlegame", "endgame"}, split
        assert len({r["source"] for r in records}) >= 2, split
        for record in records:
            board = chess.Board(record["fen"])
            moves = [c["move"] for c in record["candidates"]]
            assert len(set(moves)) == len(moves) == min(5, board.legal_moves.count()), (split, record["fen"])
            assert all(chess.Move.from_uci(move) in board.legal_moves for move in moves), (split, record["fen"])
            assert all(isinstance(c["eval"], float) for c in record["candidates"]), (split, record["fen"])
            assert len(record["history"]) <= 10 and record["engine"].startswith("Stockfish")
            assert record["limit"] == {"nodes": nodes}, (split, record["fen"])


def test_train_validation_and_test_are_disjoint() -> None:
    """No position twice in a file, and none shared by two parts, P: and A: rows alike."""
    keys = {}
    for split, records in policy_files().items():
        keys[split] = {position_key(r["fen"]) for r in records}
        assert len(keys[split]) == len(records), split
    for split in HELD_OUT_SPLITS:
        keys[split] |= {position_key(r["fen"]) for r in read_jsonl(BUNDLED[f"arbiter_{split}"])}
    assert keys["train"].isdisjoint(keys["validation"])
    assert keys["train"].isdisjoint(keys["test"])
    assert keys["validation"].isdisjoint(keys["test"])


def test_bundled_phase_mix_and_history_coverage() -> None:
    train = read_jsonl(BUNDLED["policy_train"])
    phases = Counter(r["phase"] for r in train)
    assert min(phases.values()) >= 0.15 * len(train), phases
    assert sum(bool(r["history"]) for r in train) >= 0.95 * len(train)


@pytest.mark.parametrize("split", HELD_OUT_SPLITS)
def test_heldout_arbiter_case_mix_recomputed_with_python_chess(split: str) -> None:
    rows = read_jsonl(BUNDLED[f"arbiter_{split}"])
    assert len(rows) >= 1500
    kinds: Counter[str] = Counter()
    for row in rows:
        board = chess.Board(row["fen"])
        move = chess.Move.from_uci(row["move"])
        if move not in board.legal_moves:
            kinds["illegal"] += 1
            continue
        kinds["castling"] += board.is_castling(move)
        kinds["en_passant"] += board.is_en_passant(move)
        kinds["promotion"] += bool(move.promotion)
        board.push(move)
        kinds["terminal"] += board.is_game_over()
        kinds["checkmate"] += board.is_checkmate()
        kinds["stalemate"] += board.is_stalemate()
        kinds["insufficient"] += board.is_insufficient_material()
    assert kinds["terminal"] >= 0.10 * len(rows) and kinds["illegal"] >= 0.10 * len(rows), kinds
    assert min(kinds[k] for k in ("castling", "en_passant", "promotion", "checkmate", "stalemate", "insufficient")) > 0


def test_loaders_give_problems_with_recomputed_truths() -> None:
    policy = load_policy_problems("validation")
    assert all(p.task == "P" and isinstance(p.truth, PolicyTruth) for p in policy)
    assert policy[0].prompt_text == "P: " + policy[0].truth.fen
    held = load_arbiter_problems("test")
    assert all(p.task == "A" and isinstance(p.truth, ArbiterTruth) for p in held)
    assert all(p.truth.history[-1] == p.truth.move and len(p.truth.history) <= 10 for p in held)


def arbiter_case(truth: ArbiterTruth) -> str:
    return move_case(truth.fen, truth.move)


def test_a_move_case_is_illegal_unless_the_move_is_legal() -> None:
    start = chess.STARTING_FEN
    cases = [move_case(start, uci) for uci in ("e2e4", "e2e5", "e7e5", "zz")]
    assert cases == ["normal", "illegal", "illegal", "illegal"]
    assert move_case("k7/8/8/8/8/8/8/K6R w - - 0 1", "h1h8") == "normal"  # a check, not a mate
    assert move_case("7k/8/6K1/8/8/8/8/R7 w - - 0 1", "a1a8") == "checkmate"


# -- the held-out A: problems evaluated ------------------------------------------------------------

TRAINED_MIX = {"normal": 0.3, "illegal": 0.4, "insufficient": 0.15, "checkmate": 0.05, "stalemate": 0.05,
               "castling": 0.05}


def eval_spec(**knobs) -> Eval:
    return spec_of(Eval, {**OmegaConf.to_container(OmegaConf.load(CONF / "eval" / "default.yaml")), **knobs}, "eval")


def test_the_evaluation_takes_the_first_held_out_problems_of_each_case_in_its_shares() -> None:
    held = load_arbiter_problems("validation")
    chosen = eval_problems(eval_spec(num_policy=0, num_arbiter=256, arbiter_cases=TRAINED_MIX), [], held, seed=0)
    counts = {"normal": 77, "illegal": 102, "insufficient": 38, "checkmate": 13, "stalemate": 13, "castling": 13}
    assert case_counts(TRAINED_MIX, 256) == counts  # shares x 256 rounded down, 4 left to the largest remainders
    assert Counter(arbiter_case(p.truth) for p in chosen) == counts
    positions = [held.index(p) for p in chosen]
    assert positions == sorted(positions)
    for case, count in counts.items():
        assert [p for p in chosen if arbiter_case(p.truth) == case] == \
            [p for p in held if arbiter_case(p.truth) == case][:count]
    assert eval_problems(eval_spec(num_policy=0, num_arbiter=5), [], held, seed=0) == held[:5]  # null: file order


def test_held_out_case_shares_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"^eval.arbiter_cases: the shares must sum to 1, got 0.5$"):
        eval_spec(arbiter_cases={"normal": 0.5})
    with pytest.raises(ConfigError, match=r"^eval.arbiter_cases.illegal=0.4: 600 of eval.num_arbiter=1500 asked, "
                                          r"the held-out validation part has 300$"):
        eval_problems(eval_spec(num_arbiter=1500, arbiter_cases=TRAINED_MIX), [], load_arbiter_problems("validation"), seed=0)


@pytest.mark.slow
def test_arbiter_training_stream_has_the_configured_case_shares() -> None:
    """4,000 draws of the default stream: each case within 2 points of its configured share, and the
    illegal draws spread over every illegal kind."""
    cfg = OmegaConf.load(CONF / "data" / "bundled.yaml")
    stream = load_arbiter_problems("train", cfg)
    draws = [stream[i].truth for i in range(4000)]
    counts = Counter(arbiter_case(t) for t in draws)
    for case, share in cfg.arbiter_cases.items():
        assert abs(counts[case] / len(draws) - share) < 0.02, (case, counts[case], share)
    kinds = Counter(kind for t in draws if arbiter_case(t) == "illegal"
                    for m, kind in illegal_moves(chess.Board(t.fen), random.Random(0)) if m.uci() == t.move)
    assert len(kinds) >= 6
    train_keys = {position_key(r["fen"]) for r in read_jsonl(BUNDLED["policy_train"])}
    assert all(t.history[-1] == t.move and len(t.history) <= 10 for t in draws)
    assert sum(position_key(t.fen) in train_keys for t in draws) > len(draws) // 3  # walks start there


def test_the_arbiter_stream_leaves_out_held_out_positions_and_is_unchanged_without_them() -> None:
    """A random walk may reach a held-out or final-pool position: excluding() drops those training positions and
    pooled transitions, and a stream none of whose positions are excluded deals the same problems."""
    cfg = OmegaConf.merge(OmegaConf.load(CONF / "data" / "bundled.yaml"),
                          {"arbiter_pool_size": 8, "arbiter_pool_walks": 400})
    plain, untouched = load_arbiter_problems("train", cfg), load_arbiter_problems("train", cfg).excluding(frozenset())
    assert [plain[i] for i in range(60)] == [untouched[i] for i in range(60)]
    planted = frozenset({position_key(plain.positions[0][0]), position_key(plain.pools["checkmate"][0][0])})
    stream = load_arbiter_problems("train", cfg).excluding(planted)
    assert len(stream.positions) < len(plain.positions) and len(stream.pools["checkmate"]) < len(plain.pools["checkmate"])
    assert not any(position_key(stream.transition(i)[0]) in planted for i in range(300))
    with pytest.raises(ValueError, match="needs a training position outside the held-out parts"):
        load_arbiter_problems("train", cfg).excluding(frozenset(position_key(f) for f, _ in plain.positions))


def test_a_run_trains_on_no_a_position_of_either_held_out_part_or_the_final_pool() -> None:
    from rookworld.app.config import compose, load_run
    from rookworld.run.build import heldout_keys, make_sampler

    spec = load_run(compose(["experiment=quickstart", "data.arbiter_pool_size=8", "data.arbiter_pool_walks=400"]))
    keys = heldout_keys(spec.data)
    test_fen = load_policy_problems("test", spec.data.as_mapping())[0].truth.fen
    assert position_key(test_fen) in keys and keys >= final_pool.position_keys()
    stream = make_sampler(spec).problems["A"]
    assert not any(position_key(fen) in keys for fen, _ in stream.positions)
    assert not any(position_key(t[0]) in keys for pool in stream.pools.values() for t in pool)


def test_arbiter_training_stream_is_seeded_and_configurable() -> None:
    # small pools: filling the default ones takes ~10 s for each seed and case set, and neither the
    # seeding nor the checks of the shares depend on their size
    cfg = OmegaConf.merge(OmegaConf.load(CONF / "data" / "bundled.yaml"),
                          {"arbiter_pool_size": 8, "arbiter_pool_walks": 400})
    stream, again = load_arbiter_problems("train", cfg), load_arbiter_problems("train", cfg)
    assert [stream[i] for i in range(50)] == [again[i] for i in range(50)]
    other = load_arbiter_problems("train", OmegaConf.merge(cfg, {"arbiter_seed": 1}))
    assert [stream[i] for i in range(50)] != [other[i] for i in range(50)]
    only_mates = OmegaConf.merge(cfg, {"arbiter_cases": {**{k: 0.0 for k in cfg.arbiter_cases}, "checkmate": 1.0}})
    assert all(p.truth.reward == 1.0 and p.truth.terminated for p in
               (load_arbiter_problems("train", only_mates)[i] for i in range(100)))
    with pytest.raises(ValueError, match=r"data.arbiter_cases: the shares must sum to 1"):
        load_arbiter_problems("train", OmegaConf.merge(cfg, {"arbiter_cases": {"normal": 0.5}}))
    with pytest.raises(ValueError, match=r"unknown cases \['mate'\]"):
        load_arbiter_problems("train", OmegaConf.merge(cfg, {"arbiter_cases": {"mate": 1.0}}))


def test_sampler_reads_the_arbiter_stream_in_order_and_resumes() -> None:
    cfg = OmegaConf.load(CONF / "data" / "bundled.yaml")
    stream = load_arbiter_problems("train", cfg)
    policy = load_policy_problems("validation")
    sampler = ProblemSampler(policy, stream, weights={"P": 0.5, "A": 0.5}, seed=0)
    sampler.sample(8)
    state = sampler.state_dict()
    assert state["sizes"] == {"P": len(policy), "A": "stream"} and state["cursor"]["A"] == 4
    resumed = ProblemSampler(policy, stream, weights={"P": 0.5, "A": 0.5}, seed=0)
    resumed.load_state_dict(state)
    assert resumed.sample(8) == sampler.sample(8)
    first = ProblemSampler([], stream, weights={"A": 1.0}, seed=0).sample(6)
    assert sorted(p.prompt_text for p in first) == sorted(stream[i].prompt_text for i in range(6))


def test_data_configs_dispatch_to_the_bundled_files() -> None:
    cfg = OmegaConf.load(CONF / "data" / "bundled.yaml")
    for split in HELD_OUT_SPLITS:
        assert load_policy_problems(split, cfg) == load_policy_problems(split)
        assert load_arbiter_problems(split, cfg) == load_arbiter_problems(split)
    assert load_policy_problems("validation") != load_policy_problems("test")
    with pytest.raises(ValueError, match="split"):
        load_policy_problems("heldout")


# -- sampler ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def problems() -> tuple[list, list]:
    return load_policy_problems("validation")[:50], load_arbiter_problems("validation")[:20]


def test_sampler_is_seeded_and_follows_the_weights(problems: tuple[list, list]) -> None:
    policy, arbiter = problems
    first = ProblemSampler(policy, arbiter, {"P": 0.8, "A": 0.2}, seed=1)
    second = ProblemSampler(policy, arbiter, {"P": 0.8, "A": 0.2}, seed=1)
    batches = [first.sample(8) for _ in range(25)]
    assert batches == [second.sample(8) for _ in range(25)]
    counts = Counter(p.task for batch in batches for p in batch)
    assert counts == {"P": 160, "A": 40}
    assert ProblemSampler(policy, arbiter, seed=2).sample(8) != batches[0]


def test_sampler_visits_every_problem_once_per_epoch(problems: tuple[list, list]) -> None:
    policy, arbiter = problems
    sampler = ProblemSampler(policy, arbiter, {"P": 1.0, "A": 0.0}, seed=0)
    epoch_one = [p for _ in range(10) for p in sampler.sample(5)]
    epoch_two = [p for _ in range(10) for p in sampler.sample(5)]
    assert sorted(map(id, epoch_one)) == sorted(map(id, policy)) == sorted(map(id, epoch_two))
    assert epoch_one != epoch_two and sampler.epoch("P") == 1


def test_sampler_state_dict_resumes_the_same_sequence(problems: tuple[list, list]) -> None:
    policy, arbiter = problems
    sampler = ProblemSampler(policy, arbiter, {"P": 0.7, "A": 0.3}, seed=5)
    for _ in range(13):
        sampler.sample(7)
    state = json.loads(json.dumps(sampler.state_dict()))  # survives serialisation
    expected = [sampler.sample(7) for _ in range(20)]
    resumed = ProblemSampler(policy, arbiter, {"P": 0.7, "A": 0.3}, seed=5)
    resumed.load_state_dict(state)
    assert [resumed.sample(7) for _ in range(20)] == expected


@pytest.mark.parametrize(
    "weights, match",
    [
        ({"P": -0.1, "A": 1.1}, "task_mix.P"),
        ({"P": 0.5, "A": 0.4}, "sum to 1"),
        ({"P": 0.5, "X": 0.5}, "unknown"),
        ({"P": float("nan"), "A": 1.0}, "task_mix.P"),
    ],
)
def test_sampler_rejects_bad_weights(problems: tuple[list, list], weights: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ProblemSampler(*problems, weights, seed=0)


def test_sampler_rejects_a_weighted_task_without_problems(problems: tuple[list, list]) -> None:
    with pytest.raises(ValueError, match=r"task_mix.A=0.2"):
        ProblemSampler(problems[0], [], {"P": 0.8, "A": 0.2})
    assert len(ProblemSampler(problems[0], [], {"P": 1.0, "A": 0.0}).sample(4)) == 4


# -- annotate CLI ----------------------------------------------------------------------------------


@needs_stockfish
def test_annotate_fens_with_moves_and_pgn(tmp_path: Path) -> None:
    fens = tmp_path / "fens.txt"
    fens.write_text(f"{chess.STARTING_FEN} e2e4 e7e5 g1f3\n# comment\n8/8/8/8/8/5k2/8/6qK w - - 0 1\n")
    out = tmp_path / "out.jsonl"
    annotate.main(["--fens", str(fens), "--output", str(out), "--depth", "4"])
    first, second = read_jsonl(out)
    assert first["history"] == ["e2e4", "e7e5", "g1f3"] and first["fen"].split()[1] == "b"
    assert first["phase"] == "opening" and first["source"] == "fens:fens.txt" and first["limit"] == {"depth": 4}
    assert second["phase"] == "endgame" and [c["move"] for c in second["candidates"]] == ["h1g1"]
    pgn = tmp_path / "games.pgn"
    pgn.write_text('[Event "t"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 5. O-O Be7 *\n')
    out = tmp_path / "pgn.jsonl.gz"
    annotate.main(["--pgn", str(pgn), "--output", str(out), "--depth", "4", "--pgn-sample-rate", "1.0"])
    records = read_jsonl(out)
    assert len(records) == 10 and records[-1]["history"][-1] == "f8e7"
    assert all(len(r["history"]) == min(i + 1, 10) for i, r in enumerate(records))


@needs_stockfish
def test_annotate_selfplay_split_keeps_games_apart(tmp_path: Path) -> None:
    out, held = tmp_path / "train.jsonl", tmp_path / "held.jsonl"
    annotate.main(["--selfplay", "30", "--heldout", "5", "--heldout-output", str(held), "--output", str(out),
                   "--depth", "3", "--play-depth", "2", "--seed", "1", "--record-prob", "0.5"])
    train, heldout = read_jsonl(out), read_jsonl(held)
    assert len(train) + len(heldout) == 30 and len(heldout) >= 5
    assert {position_key(r["fen"]) for r in train}.isdisjoint(position_key(r["fen"]) for r in heldout)


@needs_stockfish
def test_annotate_relabel_keeps_the_positions_and_recomputes_the_labels(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    rows = [{**r, "game": i // 3, "split": "validation"} for i, r in enumerate(read_jsonl(BUNDLED["policy_validation"])[:6])]
    annotate.write_jsonl(source, rows)  # a self-play game's index and split are kept too
    outputs = []
    for workers in ("1", "2"):
        out = tmp_path / f"out{workers}.jsonl"
        annotate.main(["--relabel", str(source), "--output", str(out), "--nodes", "3000", "--workers", workers])
        outputs.append(read_jsonl(out))
    before, after = read_jsonl(source), outputs[0]
    assert outputs[0] == outputs[1]  # one process or two: the same labels
    keep = ("fen", "history", "phase", "source", "game", "split")
    assert [{k: r[k] for k in keep} for r in after] == [{k: r[k] for k in keep} for r in before]
    assert all(r["limit"] == {"nodes": 3000} and r["candidates"] for r in after)


def test_random_endgame_boards_are_valid_few_piece_positions() -> None:
    import random

    rng = random.Random(0)
    for _ in range(50):
        board = random_endgame_board(rng)
        assert board.is_valid() and not board.is_game_over() and len(board.piece_map()) <= 7
        assert game_phase(board) == "endgame"


# -- rookworld_7m ----------------------------------------------------------------------------------

BLACK_FEN = "r1b1kbnr/pp2pppp/n1p5/q2PP3/3P4/2N5/PP3PPP/R1BQKBNR b KQkq - 2 6"
WHITE_FEN = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"


def policy_row(fen: str, moves: list[str], evals: list[float], best: str) -> str:
    evals_text = " ".join(str(e) for e in evals)
    return "P: " + fen.ljust(90) + "M: " + " ".join(moves).ljust(30) + "E: " + evals_text.ljust(40) + "B: " + best


DATASET_ROWS = [
    # Black to move, published B (c8d7) is the lowest-E candidate: the tasks.md defect
    policy_row(BLACK_FEN, ["c6d5", "a6b4", "c8d7", "a6c7", "a6b8"], [-2.0, -2.07, -2.92, -2.79, -2.66], "c8d7"),
    policy_row(WHITE_FEN, ["d2d4", "e2e4", "g1f3"], [0.25, 0.31, 0.2], "e2e4"),
    policy_row(WHITE_FEN, ["e2e5", "d2d4"], [0.9, 0.1], "e2e5"),  # illegal candidate: skipped
    # illegal move e2e5 recorded as a legal transition
    "A: " + WHITE_FEN + "+e2e5+e2e5+rnbqkbnr/pppppppp/8/4P3/8/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1+0.001+0+0",
    # correct row without the "A: " prefix, as some published rows are
    WHITE_FEN + "+e2e4+e2e4+rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1+0.001+0+0",
    "garbage",
]


def write_rows(tmp_path: Path, fmt: str) -> Path:
    if fmt == "jsonl":
        path = tmp_path / "rows.jsonl"
        path.write_text("".join(json.dumps({"text": t}) + "\n" for t in DATASET_ROWS))
        return path
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"text": DATASET_ROWS}), path)
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_rookworld7m_loader_corrects_the_published_defects(tmp_path: Path, fmt: str) -> None:
    path = write_rows(tmp_path, fmt)
    rows = load_rookworld7m("train", train_files=[str(path)])
    black, white = (p.truth for p in rows.policy)
    assert black.fen == BLACK_FEN and black.best_move == "c6d5"  # highest E, not the B label
    assert [c.eval for c in black.candidates] == [-2.0, -2.07, -2.66, -2.79, -2.92]
    assert white.best_move == "e2e4"
    illegal, legal = (p.truth for p in rows.arbiter)
    assert (illegal.reward, illegal.truncated, illegal.next_fen) == (-1.0, True, WHITE_FEN)
    assert (legal.reward, legal.terminated, legal.history) == (0.001, False, ("e2e4",))
    assert (rows.skipped, rows.relabelled, rows.corrected) == (2, 1, 1)


def test_rookworld7m_policy_row_with_leading_whitespace_is_loaded(tmp_path: Path) -> None:
    row = DATASET_ROWS[1]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in (row, "  " + row, "\n\t" + row)))
    rows = load_rookworld7m("train", train_files=[str(path)])
    assert rows.skipped == 0 and len(rows.policy) == 3
    assert len({p.truth for p in rows.policy}) == 1 and rows.policy[0].truth.best_move == "e2e4"


def test_rookworld7m_row_limits_and_config_dispatch(tmp_path: Path) -> None:
    path = write_rows(tmp_path, "jsonl")
    limited = load_rookworld7m("train", train_files=[str(path)], max_policy_rows=1, max_arbiter_rows=1)
    assert (len(limited.policy), len(limited.arbiter)) == (1, 1)
    cfg = OmegaConf.load(CONF / "data" / "rookworld7m.yaml")
    cfg.train_files = [str(path)]
    assert [p.truth.best_move for p in load_policy_problems("train", cfg)] == ["c6d5", "e2e4"]
    assert len(load_arbiter_problems("train", cfg)) == 2
    assert load_policy_problems("validation", cfg) == load_policy_problems("validation")  # heldout: bundled


def test_rookworld7m_offline_gives_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(DatasetUnavailableError) as info:
        load_rookworld7m("train", repo_id="rookworld-tests/does-not-exist", train_files=["data/x.parquet"])
    assert "\n" not in str(info.value) and "rookworld-tests/does-not-exist" in str(info.value)


def test_annotate_arbiter_cases_meet_the_quotas(tmp_path: Path) -> None:
    out = tmp_path / "arbiter.jsonl"
    annotate.main(["--arbiter", "30", "--positions", str(BUNDLED["policy_validation"]), "--random-games", "40",
                   "--exclude", str(BUNDLED["policy_train"]), "--output", str(out), "--seed", "1"])
    rows = read_jsonl(out)
    cases = Counter(r["case"] for r in rows)
    assert len(rows) == 30 and cases["illegal"] == 6 and cases["checkmate"] == 3
    for row in rows:
        board = chess.Board(row["fen"])
        legal = chess.Move.from_uci(row["move"]) in board.legal_moves
        assert legal == (row["case"] != "illegal") and len(row["history_before"]) <= 10


# ---- bad input: one-line errors naming the bad value --------------------------------------------


def test_annotate_cli_defaults_come_from_the_engine_yaml_and_selfplay_config() -> None:
    engine = OmegaConf.load(Path(annotate.__file__).parents[2] / "conf" / "engine" / "stockfish.yaml")
    args = annotate.parse_args(["--selfplay", "1", "--output", "x.jsonl"])
    assert (args.engine_path, args.threads, args.hash_mb, args.multipv) == (
        engine.path, engine.threads, engine.hash_mb, engine.multipv)
    assert annotate.annotation_limit(args) == {"depth": engine.depth, "nodes": engine.nodes, "time_limit": None}
    override = annotate.parse_args(["--selfplay", "1", "--output", "x.jsonl", "--depth", "7"])
    assert annotate.annotation_limit(override) == {"depth": 7, "nodes": None, "time_limit": None}
    assert annotate.selfplay_config(args) == annotate.SelfPlayConfig()


def test_training_config_does_not_compose_the_engine_group() -> None:
    defaults = OmegaConf.load(Path(annotate.__file__).parents[2] / "conf" / "config.yaml").defaults
    assert not any("engine" in entry for entry in defaults if isinstance(entry, dict))


def test_malformed_records_name_the_file_and_line(tmp_path: Path) -> None:
    good = read_jsonl(BUNDLED["policy_validation"])[0]
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps(good) + "\n\n" + json.dumps({"fen": good["fen"]}) + "\n")
    with pytest.raises(ValueError, match=r"missing\.jsonl:3: missing key 'candidates'"):
        load_policy_problems("train", missing)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(good) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"broken\.jsonl:2: not valid JSON"):
        arbiter_training_stream(broken, {"normal": 1.0}, seed=0, pool_size=1, pool_walks=1, pool_cache=None)
    bad_case = tmp_path / "cases.jsonl"
    bad_case.write_text(json.dumps({"fen": "not a fen", "history_before": [], "move": "e2e4"}) + "\n")
    with pytest.raises(ValueError, match=r"cases\.jsonl:1: .*not a fen") as info:
        load_arbiter_problems("validation", bad_case)
    assert "\n" not in str(info.value)


def test_rookworld7m_heldout_typo_is_rejected() -> None:
    cfg = OmegaConf.load(Path(annotate.__file__).parents[2] / "conf" / "data" / "rookworld7m.yaml")
    cfg.heldout = "hubb"
    with pytest.raises(ValueError, match=r"data\.heldout='hubb'"):
        load_policy_problems("validation", cfg)


def test_rookworld7m_jsonl_without_text_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"txt": "P: x"}) + "\n")
    with pytest.raises(ValueError, match=r"rows\.jsonl:1: missing key 'text'"):
        list(rookworld7m.iter_texts(path))


def test_annotate_rejects_too_few_arbiter_rows(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    minimum = annotate.arbiter_min_rows()
    assert minimum == 9  # eight rounded-up quotas of >= 1 row each, plus room for "normal"
    with pytest.raises(SystemExit) as info:
        annotate.main(["--arbiter", "3", "--output", str(tmp_path / "a.jsonl")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "--arbiter 3" in err and f"at least {minimum}" in err


@pytest.mark.parametrize("line, bad", [("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNX w KQkq - 0 1", "RNBQKBNX"),
                                       (chess.STARTING_FEN + " e2e4 zz99", "zz99")])
def test_annotate_bad_fen_or_move_names_path_line(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                  line: str, bad: str) -> None:
    fens = tmp_path / "in.fens"
    fens.write_text("# comment\n" + line + "\n")
    with pytest.raises(SystemExit) as info:
        annotate.main(["--fens", str(fens), "--output", str(tmp_path / "out.jsonl"), "--depth", "1"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith("annotate: error: ") and err.count("\n") == 1
    assert f"{fens}:2:" in err and bad in err


def test_annotate_missing_engine_and_missing_input_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    fens = tmp_path / "in.fens"
    fens.write_text(chess.STARTING_FEN + "\n")
    with pytest.raises(SystemExit) as info:
        annotate.main(["--fens", str(fens), "--output", str(tmp_path / "o.jsonl"), "--engine-path", "/no/stockfish"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith("annotate: error: ") and "'/no/stockfish'" in err
    with pytest.raises(SystemExit):
        annotate.main(["--arbiter", "30", "--positions", str(tmp_path / "absent.jsonl"),
                       "--output", str(tmp_path / "a.jsonl")])
    err = capsys.readouterr().err
    assert err.startswith("annotate: error: ") and "absent.jsonl" in err and err.count("\n") == 1


def test_load_time_rejects_zero_repeats(capsys: pytest.CaptureFixture) -> None:
    from rookworld.commands import load_time

    with pytest.raises(SystemExit) as info:
        load_time.main(["--repeats", "0"])
    assert info.value.code == 2 and "--repeats 0" in capsys.readouterr().err


def test_pooled_cases_are_dealt_without_replacement() -> None:
    """A pooled transition repeats only once its whole pool has been dealt: at most ceil(draws / pool)."""
    import math

    shares = {"checkmate": 0.4, "promotion": 0.3, "illegal": 0.3}
    stream = arbiter_training_stream(BUNDLED["policy_train"], shares, seed=0, pool_size=8, pool_walks=400,
                                     pool_cache=None)
    draws = 120
    by_pool: dict[str, Counter] = {}
    for index in range(draws):
        case = stream.drawn_case(index)
        pool = {"illegal:missing_promotion": "missing_promotion"}.get(case, case)
        if pool in stream.pools:
            by_pool.setdefault(pool, Counter())[stream.transition(index)] += 1
    assert set(by_pool) == {"checkmate", "promotion", "missing_promotion"}
    for pool, counts in by_pool.items():
        assert set(counts) <= set(stream.pools[pool])
        assert max(counts.values()) == math.ceil(sum(counts.values()) / len(stream.pools[pool])), pool
    again = arbiter_training_stream(BUNDLED["policy_train"], shares, seed=0, pool_size=8, pool_walks=400,
                                    pool_cache=None)
    assert [again.transition(i) for i in reversed(range(draws))][::-1] == [stream.transition(i) for i in range(draws)]


def test_stored_pools_are_the_collected_ones_and_later_processes_read_them(tmp_path: Path) -> None:
    shares = {"normal": 0.5, "castling": 0.25, "promotion": 0.25}
    stream = partial(arbiter_training_stream, BUNDLED["policy_train"], shares, pool_size=8, pool_walks=400)
    plain, stored = stream(seed=0, pool_cache=None), stream(seed=0, pool_cache=str(tmp_path))
    [path] = tmp_path.glob("*.json")
    read = stream(seed=0, pool_cache=str(tmp_path))
    assert plain.pools == stored.pools == read.pools and len(plain.pools["castling"]) == 8
    assert [read[i] for i in range(40)] == [plain[i] for i in range(40)]
    pools = json.loads(path.read_text())
    pools["castling"] = pools["castling"][:1]  # a stored file is what a later stream deals from
    path.write_text(json.dumps(pools))
    fen, history, move = pools["castling"][0]
    assert stream(seed=0, pool_cache=str(tmp_path)).pools["castling"] == [(fen, tuple(history), move)]
    stream(seed=1, pool_cache=str(tmp_path))
    assert len(list(tmp_path.glob("*.json"))) == 2  # another seed, another file
    path.write_text("{")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: unreadable stored A: pools .*; delete the file$"):
        stream(seed=0, pool_cache=str(tmp_path))


def test_a_blocks_draw_gives_each_seed_its_own_problems_and_every_configuration_of_a_seed_the_same() -> None:
    """eval.draw=blocks: seed s evaluates block s of a seeded shuffle of each task's held-out part: disjoint blocks
    for the seeds the part has room for, then round again; the same draw in every run of that seed."""
    from rookworld.data.positions import load_policy_problems

    policy, arbiter = load_policy_problems("test"), load_arbiter_problems("test")
    spec = eval_spec(num_policy=150, num_arbiter=150, draw="blocks")
    draws = [eval_problems(spec, policy, arbiter, seed=seed) for seed in range(10)]
    assert all(len(d) == 300 for d in draws)
    ids = [{id(p) for p in d} for d in draws]
    assert all(len(i) == 300 for i in ids) and len(set().union(*ids)) == 3000  # ten disjoint blocks
    assert eval_problems(spec, policy, arbiter, seed=3) == draws[3]  # another run of seed 3: the same problems
    arbiter_only = eval_spec(num_policy=0, num_arbiter=150, draw="blocks")
    assert eval_problems(arbiter_only, [], arbiter, seed=len(arbiter) // 150) == draws[0][150:]  # round again
    assert draws[0][:150] != policy[:150]  # a shuffle, not file order
    with pytest.raises(ConfigError, match=r"eval.num_policy=5000: the held-out part holds \d+: no block of 5000"):
        eval_problems(eval_spec(num_policy=5000, draw="blocks"), policy, arbiter, seed=0)
    with pytest.raises(ConfigError, match="eval.draw='blocks': blocks draws from the held-out mix"):
        eval_spec(draw="blocks", arbiter_cases=TRAINED_MIX)
