"""The shipped self-play data (rookworld/data/selfplay/README.md): counts, label budgets and
disjointness, read from the files themselves."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import chess
import pytest

from rookworld.app.config import compose, load_run
from rookworld.specs.rules import ConfigError
from rookworld.data.positions import BUNDLED, load_arbiter_problems, load_policy_problems, policy_truth_from_record
from rookworld.data.records import iter_jsonl, position_key

SELFPLAY = Path(__file__).resolve().parents[1] / "rookworld" / "data" / "selfplay"
TRAIN = Path(__file__).resolve().parents[1] / "data" / "selfplay" / "train.jsonl.gz"  # regenerated, not shipped
P_PARTS = {"rl": (57_218, 697, 10_000), "validation": (14_908, 186, 100_000), "test": (16_554, 195, 100_000)}
A_PARTS = ("validation_arbiter", "test_arbiter")
FINAL = {"final": (12_039, 150, 100_000)}  # the final pool: new games of its own run (seed 2028), README "The final pool"
FINAL_RUN = Path(__file__).resolve().parents[1] / "docs" / "runs" / "final_pool"
pytestmark = pytest.mark.xdist_group("selfplay_data")  # one worker reads each file once (rows() is cached)


@lru_cache(maxsize=None)
def rows(name: str) -> tuple[dict, ...]:
    path = TRAIN if name == "train" else SELFPLAY / f"{name}.jsonl.xz"
    return tuple(record for _, record in iter_jsonl(path))


def keys(name: str) -> set[str]:
    return {position_key(r["fen"]) for r in rows(name)}


@pytest.mark.parametrize("part", sorted({**P_PARTS, **FINAL}))
@pytest.mark.slow
def test_each_p_part_has_its_rows_games_and_label_budget(part: str) -> None:
    n_rows, n_games, nodes = {**P_PARTS, **FINAL}[part]
    part_rows = rows(part)
    assert len(part_rows) == n_rows == len(keys(part))  # no position twice
    assert len({r["game"] for r in part_rows}) == n_games
    assert {r["split"] for r in part_rows} == {part}
    assert all(r["limit"] == {"nodes": nodes} for r in part_rows)
    checked = part_rows[::10]  # MultiPV 5, on every tenth row (legal-move counts cost CI time)
    assert all(len(r["candidates"]) == min(5, chess.Board(r["fen"]).legal_moves.count()) for r in checked)


def test_the_run_record_counts_a_train_split_of_over_a_million_disjoint_positions() -> None:
    done = json.loads((SELFPLAY / "done.json").read_text())
    run = json.loads((SELFPLAY / "run.json").read_text())
    assert run["engine"]["nodes"] == 10_000 and run["engine"]["multipv"] == 5 and run["seed"] == 2026
    assert done["splits"]["train"]["positions"] >= 1_000_000  # "splits" is written only after the disjointness check
    for part, (n_rows, n_games, _) in P_PARTS.items():
        assert (done["splits"][part]["positions"], done["splits"][part]["games"]) == (n_rows, n_games)


def test_positions_and_games_are_disjoint_across_the_p_parts_and_from_the_bundled_held_out_files() -> None:
    parts = sorted(P_PARTS)
    for i, a in enumerate(parts):
        for b in parts[i + 1:]:
            assert keys(a).isdisjoint(keys(b)), (a, b)
            assert {r["game"] for r in rows(a)}.isdisjoint(r["game"] for r in rows(b)), (a, b)
    bundled_heldout = {position_key(r["fen"]) for split in ("validation", "test")
                       for _, r in iter_jsonl(BUNDLED[f"policy_{split}"])}
    assert all(keys(part).isdisjoint(bundled_heldout) for part in parts)  # the run excluded them
    bundled_train = {position_key(r["fen"]) for _, r in iter_jsonl(BUNDLED["policy_train"])}
    assert {part: len(keys(part) & bundled_train) for part in parts} == {"rl": 7, "test": 4, "validation": 1}  # README


def test_the_a_pools_hold_ten_thousand_transitions_of_positions_no_other_part_has() -> None:
    p_positions = set().union(*(keys(part) for part in P_PARTS))
    validation, test = (keys(part) for part in A_PARTS)
    assert all(len(rows(part)) == 10_000 for part in A_PARTS)
    assert validation.isdisjoint(test)
    assert (validation - keys("validation")).isdisjoint(p_positions)  # A: rows reuse their own part's positions only
    assert (test - keys("test")).isdisjoint(p_positions)


def test_the_final_pool_shares_no_position_with_any_other_part_or_bundled_file() -> None:
    """The final pool (a staged sweep's confirmation reads it, nothing else): its own self-play run (seed 2028,
    every game of it), every legal move's value at the test pool's budget, and 10,000 A: transitions; no
    position of it in another shipped part, in a bundled file, or (its A: rows) in another A: pool."""
    run = json.loads((FINAL_RUN / "run.json").read_text())
    assert run["seed"] == 2028 and run["engine"]["nodes"] == 10_000 and run["engine"]["multipv"] == 5
    assert sum(json.loads((FINAL_RUN / "done.json").read_text())["by_split"].values()) == 12_039
    assert {json.dumps(r["action_values_limit"]) for r in rows("final")} == {'{"nodes": 3000}'}
    bundled = {position_key(r["fen"]) for name in ("policy_train", "policy_validation", "policy_test",
                                                    "arbiter_validation", "arbiter_test")
               for _, r in iter_jsonl(BUNDLED[name])}
    final, final_a = keys("final"), keys("final_arbiter")
    assert len(rows("final_arbiter")) == 10_000
    for part in (*P_PARTS, *A_PARTS):
        assert final.isdisjoint(keys(part)) and (final_a - final).isdisjoint(keys(part)), part
    assert final.isdisjoint(bundled) and (final_a - final).isdisjoint(bundled)


@pytest.mark.skipif(not TRAIN.exists(), reason="the train split is regenerated: bash tools/selfplay_data.sh")
def test_the_regenerated_train_split_is_disjoint_from_every_shipped_part() -> None:
    assert len(rows("train")) == 1_027_065
    train_keys, train_games = keys("train"), {r["game"] for r in rows("train")}
    for part in (*P_PARTS, *A_PARTS, *FINAL, "final_arbiter"):
        assert train_keys.isdisjoint(keys(part)), part
    for part in P_PARTS:
        assert train_games.isdisjoint(r["game"] for r in rows(part)), part


@pytest.mark.slow
def test_data_selfplay_loads_the_rl_split_for_training_and_the_pools_for_evaluation() -> None:
    spec = load_run(compose(["data=selfplay"]))
    data = spec.data.as_mapping()
    assert data["policy_train"] == str(SELFPLAY / "rl.jsonl.xz")  # its rows: the tests above
    assert len(load_arbiter_problems("test", data)) == len(load_arbiter_problems("final", data)) == 10_000
    for part, n_rows in (("validation", 14_908), ("test", 16_554), ("final", 12_039)):
        # each P: pool carries every legal move's value once (the loader checks repeats, move_values that the
        # moves are the legal ones)
        problems = load_policy_problems(part, data)
        assert len(problems) == n_rows
        assert all(len(p.truth.move_values) == len(p.truth.action_values) > 0 for p in problems)
        assert {json.dumps(r["action_values_limit"]) for r in rows(part)} == {'{"nodes": 3000}'}


def test_the_rl_split_carries_every_legal_moves_value_at_its_own_budget() -> None:
    """reward=move_value trains on the RL split (README: 1,000 nodes per move). Every row has values;
    that they are every legal move once is checked on every tenth row, as the MultiPV count above (the
    loader itself is the pools' test)."""
    rl = rows("rl")
    assert {json.dumps(r["action_values_limit"]) for r in rl} == {'{"nodes": 1000}'}
    assert all(r["action_values"] for r in rl)
    for record in rl[::10]:
        truth = policy_truth_from_record(record)
        assert len(truth.move_values) == len(record["action_values"])


def test_a_data_file_that_is_not_there_is_refused_in_one_line_naming_it() -> None:
    """experiment=sft_selfplay reads a train split that is regenerated, not shipped: without it the
    config fails before anything loads, naming the key and the path."""
    with pytest.raises(ConfigError, match=r"^data\.policy_train='nowhere/train\.jsonl\.gz': no such file"):
        load_run(compose(["data=selfplay", "data.policy_train=nowhere/train.jsonl.gz"]))
