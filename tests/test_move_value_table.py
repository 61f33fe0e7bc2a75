"""tools/move_value_table.py: the move-value recipe's table from the files tools/move_value_recipe.sh writes."""
import importlib.util
import json
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "move_value_table.py"
spec = importlib.util.spec_from_file_location("move_value_table", TOOL)
move_value_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(move_value_table)


def write_run(folder: Path, metrics: dict, play: dict | None = None) -> None:
    folder.mkdir(parents=True)
    (folder / "test_scores.json").write_text(json.dumps({"tasks": [], "problem_scores": [], "metrics": metrics}))
    if play is not None:
        (folder / "play.log").write_text("games: 100%\nlegal-move rate 0.9\nmetrics " + json.dumps(play) + "\n")


def test_the_table_pairs_seeds_and_gives_t_intervals(tmp_path):
    write_run(tmp_path / "warm_start", {"eval/P/best_move": 0.16, "eval/P/win_prob_loss": 0.2}, {"play/elo": -500.0})
    for seed, (mv, gr) in enumerate([(0.20, 0.17), (0.22, 0.18)]):
        write_run(tmp_path / f"move_value_s{seed}", {"eval/P/best_move": mv, "eval/P/win_prob_loss": 0.1 + 0.1 * seed},
                  {"play/elo": -400.0})
        write_run(tmp_path / f"graduated_s{seed}", {"eval/P/best_move": gr, "eval/P/win_prob_loss": 0.2})
    write_run(tmp_path / "graduated_s7", {"eval/P/best_move": 0.5})  # no move_value_s7: not paired
    text = move_value_table.table(tmp_path)
    assert text.splitlines()[0] == "seeds: move_value [0, 1], graduated [0, 1, 7], paired [0, 1]"
    best = next(line for line in text.splitlines() if line.startswith("| eval/P/best_move "))
    # move_value - warm start: +0.04 and +0.06, mean +0.05, half-width t(0.975, 1) * 0.01414 / sqrt(2) = 0.1271
    assert "+0.0500 [-0.0771, +0.1771]" in best
    # paired differences +0.03 and +0.04; graduated's mean over seeds 0, 1 and 7
    assert "+0.0350 [-0.0285, +0.0985]" in best and "| 0.2833 [" in best
    assert "| play/elo | -500.0000 | -400.0000 [-400.0000, -400.0000] |  | +100.0000 [+100.0000, +100.0000] |  |" in text
    assert text.endswith("relative to the warm start: -0.2500 [-3.4266, +2.9266], p=0.5")


def test_a_folder_without_move_value_runs_is_named(tmp_path):
    write_run(tmp_path / "warm_start", {"eval/P/best_move": 0.16})
    with pytest.raises(SystemExit, match="no finished move_value_sN run"):
        move_value_table.table(tmp_path)


def test_a_longer_arm_gets_its_column_and_its_paired_difference_with_move_value(tmp_path):
    write_run(tmp_path / "warm_start", {"eval/P/best_move": 0.16})
    for seed, (mv, gr, long) in enumerate([(0.20, 0.17, 0.23), (0.22, 0.18, 0.24)]):
        write_run(tmp_path / f"move_value_s{seed}", {"eval/P/best_move": mv})
        write_run(tmp_path / f"graduated_s{seed}", {"eval/P/best_move": gr})
        write_run(tmp_path / f"move_value_1600_s{seed}", {"eval/P/best_move": long})
    text = move_value_table.table(tmp_path)
    assert text.splitlines()[0].endswith(", move_value_1600 [0, 1]")
    assert "| move_value_1600, mean [95% CI] |" in text and "| move_value_1600 - move_value (paired) |" in text
    best = next(line for line in text.splitlines() if line.startswith("| eval/P/best_move "))
    assert best.endswith("| +0.0250 [-0.0385, +0.0885], p=0.126 |")  # +0.03 and +0.02
