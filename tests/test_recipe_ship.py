"""tools/recipe_ship.py: the picked GRPO model replaces the shipped one as a new lineage row, only when it ships."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

from rookworld.warm_start import lineage

TOOL = Path(__file__).resolve().parents[1] / "tools" / "recipe_ship.py"
ROUND_3 = {"round": 3, "seed": 3, "validation_score": 0.876, "test": {}, "command": "python -m rookworld.warm_start.round"}


def recipe(tmp_path: Path, ship: bool, a_exact: float) -> Path:
    out = tmp_path / "recipe"
    run = out / "move_value_1600_s12"
    run.mkdir(parents=True)
    tasks = ["P"] * 100 + ["A"] * 100
    metrics = {"eval/P/best_move": 0.22, "eval/P/legal_best": 0.96, "eval/A/next_state": a_exact}
    (run / "test_scores.json").write_text(json.dumps({"tasks": tasks, "problem_scores": [1.0] * 200,
                                                      "metrics": metrics}))
    decision = {"ship": ship, "candidate": 0.89, "baseline": 0.876, "p_value": 1e-6 if ship else 0.3, "alpha": 0.01}
    (out / "pick.json").write_text(json.dumps({"arm": "move_value_1600", "seed": 12, "run": run.name,
                                               "decision": decision}))
    return out


def shipped(tmp_path: Path, tiny_model_dir: Path) -> Path:
    into = shutil.copytree(tiny_model_dir, tmp_path / "shipped")
    (into / "README.md").write_text("# rookworld_tiny\n\nKept text.\n\n## Lineage\n\nold\n")
    (into / "lineage.json").write_text(json.dumps([ROUND_3]))
    return into


def ship(out: Path, model: Path, into: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), str(out), str(model), "--into", str(into)],
                          capture_output=True, text=True)


def test_a_model_that_ships_replaces_the_weights_and_adds_its_grpo_row(tmp_path, tiny_model_dir):
    into = shipped(tmp_path, tiny_model_dir)
    new_model = shutil.copytree(tiny_model_dir, tmp_path / "new_model")
    (new_model / "model.safetensors").write_bytes(b"new weights")
    done = ship(recipe(tmp_path, ship=True, a_exact=0.88), new_model, into)
    assert done.returncode == 0, done.stderr
    assert (into / "model.safetensors").read_bytes() == b"new weights"
    rows = lineage.read_lineage(into)
    assert rows[0] == ROUND_3 and rows[1]["round"] == "GRPO (move_value, 1600 steps, from round 3)"
    assert (rows[1]["seed"], rows[1]["reward"], rows[1]["steps"]) == (12, "move_value", 1600)
    assert rows[1]["test"]["eval/P/best_move"][0] == 0.22 and rows[1]["validation_baseline"] == 0.876
    assert lineage.used_seeds(rows) == {3}  # a GRPO run's seed is not a self-play seed
    assert lineage.next_round(rows) == 4  # nor is its row a round: the next round after it is round 4
    card = (into / "README.md").read_text()
    assert "Kept text." in card and "| GRPO (move_value, 1600 steps, from round 3) | 12 |" in card
    assert "reward=move_value seed=12 steps=1600" in card


def test_a_model_the_validation_test_does_not_ship_or_that_falls_on_a_is_refused(tmp_path, tiny_model_dir):
    into = shipped(tmp_path, tiny_model_dir)
    before = {path.name: path.read_bytes() for path in into.iterdir()}
    for ship_it, a_exact, message in [(False, 0.88, "does not ship it (p=0.3 > alpha=0.01)"),
                                      (True, 0.87, "A: exact 0.8700 on the test part falls below")]:
        out = recipe(tmp_path / str(a_exact) / str(ship_it), ship=ship_it, a_exact=a_exact)
        done = ship(out, tiny_model_dir, into)
        assert done.returncode == 1 and message in done.stderr
    assert {path.name: path.read_bytes() for path in into.iterdir()} == before
