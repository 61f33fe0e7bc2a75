"""Self-play annotation at scale: sharded, resumable after a kill, the same files for any worker count."""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import chess
import pytest

from rookworld.commands import annotate
from rookworld.data.records import position_key, read_jsonl
from rookworld.data.selfplay import SPLITS_BY_GAME, GameSettings, split_of_game
from rookworld.data.run_folder import DONE_FILE
from rookworld.data.shards import joined_path, shard_path
from annotate_helpers import interrupt_after_first_part, kill_after_first_part

pytestmark = pytest.mark.skipif(not os.access("/usr/games/stockfish", os.X_OK), reason="needs Stockfish")

ARGS = ["--selfplay", "150", "--nodes", "400", "--games-per-shard", "1", "--seed", "3", "--max-plies", "40",
        "--validation-fraction", "0.2", "--test-fraction", "0.2", "--rl-fraction", "0.2"]


def joined_bytes(folder: Path) -> dict[str, bytes]:
    return {split: joined_path(folder, split).read_bytes() for split in SPLITS_BY_GAME}


def test_a_killed_run_resumes_to_the_files_of_an_unkilled_one(tmp_path: Path) -> None:
    unkilled = tmp_path / "unkilled"
    annotate.main([*ARGS, "--shards", str(unkilled), "--workers", "2"])

    killed = tmp_path / "killed"
    shards_at_kill = kill_after_first_part([*ARGS, "--shards", str(killed), "--workers", "2"], killed)["shards"]
    assert 1 <= shards_at_kill < json.loads((unkilled / DONE_FILE).read_text())["shards"]

    annotate.main([*ARGS, "--shards", str(killed), "--workers", "1"])  # resumed, with another worker count
    assert joined_bytes(killed) == joined_bytes(unkilled)
    done = json.loads((killed / DONE_FILE).read_text())
    assert all(shard_path(killed, split, shard).exists()  # no gap
               for split in SPLITS_BY_GAME for shard in range(done["shards"]))
    rows = [row for split in SPLITS_BY_GAME for row in read_jsonl(joined_path(killed, split))]
    keys = Counter(position_key(row["fen"]) for row in rows)
    assert len(rows) == done["positions"] >= 150 and max(keys.values()) == 1  # no duplicate
    games = {}
    for row in rows:  # whole games in one split, the one drawn for the game
        assert games.setdefault(row["game"], row["split"]) == row["split"]
        assert row["split"] == split_of_game(3, row["game"], GameSettings(max_plies=40, validation_fraction=0.2, test_fraction=0.2, rl_fraction=0.2))
    assert len(set(games.values())) >= 3  # 7 games over four splits of 0.2-0.4
    assert {split: part["positions"] for split, part in done["splits"].items() if part["positions"]} == Counter(
        row["split"] for row in rows)


def test_each_record_is_a_labelled_position_whose_move_choice_came_from_its_label(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    annotate.main(["--selfplay", "20", "--nodes", "300", "--games-per-shard", "1", "--seed", "0", "--epsilon", "0",
                   "--temperature", "0.01", "--max-plies", "12", "--endgame-start-fraction", "0",
                   "--shards", str(folder)])
    rows = [row for split in SPLITS_BY_GAME for row in read_jsonl(joined_path(folder, split))]
    by_game: dict[int, list[dict]] = {}
    for row in rows:
        by_game.setdefault(row["game"], []).append(row)
        assert 1 <= len(row["candidates"]) <= 5 and row["limit"] == {"nodes": 300}
    for game_rows in by_game.values():  # at temperature ~0 each next position follows the label's best move
        for row, following in zip(game_rows, game_rows[1:]):
            board = chess.Board(row["fen"])
            board.push_uci(row["candidates"][0]["move"])
            assert position_key(board.fen()) == position_key(following["fen"])


def test_a_resume_with_other_settings_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = tmp_path / "run"
    annotate.main(["--selfplay", "5", "--nodes", "300", "--max-plies", "6", "--shards", str(folder)])
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        annotate.main(["--selfplay", "5", "--nodes", "500", "--max-plies", "6", "--shards", str(folder)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert "other settings" in err and "300" in err and "500" in err


def test_a_larger_target_extends_a_finished_run(tmp_path: Path) -> None:
    folder, settings = tmp_path / "run", ["--nodes", "300", "--max-plies", "8", "--games-per-shard", "1"]
    annotate.main(["--selfplay", "10", *settings, "--shards", str(folder)])
    first = json.loads((folder / DONE_FILE).read_text())
    annotate.main(["--selfplay", "30", *settings, "--shards", str(folder)])
    extended = json.loads((folder / DONE_FILE).read_text())
    assert first["positions"] >= 10 and extended["positions"] >= 30 and extended["shards"] > first["shards"]
    assert sum(part["positions"] for part in extended["splits"].values()) == extended["positions"]


def test_ctrl_c_stops_the_run_its_workers_and_engines_and_the_same_command_goes_on(tmp_path: Path) -> None:
    args = [*ARGS, "--workers", "2"]
    unstopped = tmp_path / "unstopped"
    annotate.main([*args, "--shards", str(unstopped)])

    folder = tmp_path / "stopped"
    code, stderr, left = interrupt_after_first_part([*args, "--shards", str(folder)], folder)
    messages = [line for line in stderr.splitlines() if line.strip() and "self-play positions" not in line]  # bar aside
    assert (code, messages) == (130, [f"annotate: stopped by SIGINT; {folder} keeps what was written, "
                                      "and the same command goes on from there"])
    assert left == []  # no worker and no engine outlives the run

    annotate.main([*args, "--shards", str(folder)])
    assert joined_bytes(folder) == joined_bytes(unstopped)


def test_under_a_time_limit_the_progress_bar_counts_positions_without_a_total(tmp_path: Path, capsys) -> None:
    """A warm-start round asks for more positions than its clock allows: the bar shows no unreachable total."""
    annotate.main([*ARGS[:1], "1000000000", *ARGS[2:], "--shards", str(tmp_path / "run"), "--workers", "1",
                   "--time-limit-s", "0.1"])
    err = capsys.readouterr().err
    bars = re.findall(r"self-play positions: [^\r\n]*?pos/s\]", err)
    assert bars and not any("1000000000" in bar or "%" in bar for bar in bars), err[-500:]
