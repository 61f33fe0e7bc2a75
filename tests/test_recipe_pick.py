"""tools/recipe_pick.py: the arm, then the seed, with the best validation chess score, and the round's paired test."""
import json
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "recipe_pick.py"


def write_scores(folder: Path, scores: list[float]) -> None:
    folder.mkdir(parents=True)
    tasks = ["P", "A"] * (len(scores) // 2)
    score = 0.5 * sum(scores[0::2]) / len(scores[0::2]) + 0.5 * sum(scores[1::2]) / len(scores[1::2])
    (folder / "validation_scores.json").write_text(json.dumps(
        {"tasks": tasks, "problem_scores": scores, "metrics": {"eval/score": score}}))


def test_the_pick_takes_the_best_arm_then_its_best_seed_and_tests_it_against_the_warm_start(tmp_path):
    write_scores(tmp_path / "warm_start", [0.5] * 400)
    write_scores(tmp_path / "move_value_s10", [0.6] * 400)
    write_scores(tmp_path / "move_value_s11", [0.7] * 200 + [0.6] * 200)
    write_scores(tmp_path / "graduated_s10", [0.9] * 40 + [0.5] * 360)  # best seed, worse arm on average
    write_scores(tmp_path / "graduated_s11", [0.5] * 400)
    (tmp_path / "recipe_smi.csv").write_text("")  # not a run
    done = subprocess.run([sys.executable, str(TOOL), str(tmp_path)], capture_output=True, text=True, check=True)
    pick = json.loads((tmp_path / "pick.json").read_text())
    assert (pick["arm"], pick["seed"], pick["run"]) == ("move_value", 11, "move_value_s11")
    assert pick["decision"]["ship"] and pick["decision"]["better"] == 400
    assert "candidate: move_value_s11 (arm move_value, seed 11)" in done.stdout
    assert "GRPO model ships: validation chess score 0.5000 -> 0.6500" in done.stdout
