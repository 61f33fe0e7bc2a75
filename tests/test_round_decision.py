"""A round's decision (rookworld/warm_start/decision.py) and its lineage row (rookworld/warm_start/lineage.py)."""
import json
import random
from pathlib import Path

from rookworld.judge.evaluate import EvalResult, score_standard_error, task_scores
from rookworld.warm_start.decision import decide, one_sided_p
from rookworld.app.config import ASSETS_DIR
from rookworld.warm_start.lineage import (lineage_metrics, portable_command, read_lineage, render_table, used_seeds,
                                          write_model_card)

REPO = Path(__file__).resolve().parents[1]

TASKS = ["P"] * 300 + ["A"] * 200


def result(scores: list[float]) -> EvalResult:
    p = [s for t, s in zip(TASKS, scores) if t == "P"]
    a = [s for t, s in zip(TASKS, scores) if t == "A"]
    metrics = task_scores({"eval/P/win_prob_loss": 1 - sum(p) / len(p), "eval/A/next_state": sum(a) / len(a)}, "chess")
    metrics["eval/score_se"] = score_standard_error(TASKS, scores)
    return EvalResult(metrics=metrics, problem_scores=scores)


def test_a_clearly_better_model_ships_and_a_worse_or_equal_one_does_not():
    rng = random.Random(0)
    base = [rng.random() for _ in TASKS]
    better = [min(1.0, s + 0.05 + 0.02 * rng.random()) for s in base]
    shipped = decide(result(better), result(base), TASKS, alpha=0.01)
    assert shipped.ship and shipped.change > 0 and shipped.p_value < 1e-6 and shipped.problems == 500
    assert "round ships" in shipped.line()
    worse = decide(result(base), result(better), TASKS, alpha=0.01)
    assert not worse.ship and worse.p_value > 0.99 and "does not ship" in worse.line()
    same = decide(result(base), result(base), TASKS, alpha=0.01)
    assert not same.ship and same.p_value == 1.0  # no difference anywhere: no evidence


def test_one_sided_p_is_the_normal_tail():
    assert abs(one_sided_p(1.96, 1.0) - 0.025) < 1e-3 and abs(one_sided_p(0.0, 1.0) - 0.5) < 1e-12


def test_the_model_card_keeps_the_readme_and_rewrites_its_lineage(tmp_path):
    metrics = {"eval/P/best_move": 0.25, "eval/P/best_move_se": 0.004, "eval/P/legal_best": 0.9,
               "eval/A/next_state": 0.8}
    row = {"round": 1, "seed": 3, "new_positions": 1200, "carried_positions": 5000, "minutes": 20.0,
           "documents": 10**6, "validation_score": 0.61,
           "test": lineage_metrics(EvalResult(metrics=metrics), TASKS)}
    assert row["test"]["eval/P/best_move"] == [0.25, 0.004]  # its own standard error
    assert abs(row["test"]["eval/P/legal_best"][1] - (0.9 * 0.1 / 300) ** 0.5) < 1e-12  # binomial, over the P: problems
    write_model_card(tmp_path, "# model\n\nHow it was made.\n", [{"round": 0, "test": {}}, row], "python -m x")
    write_model_card(tmp_path, (tmp_path / "README.md").read_text(), [{"round": 0, "test": {}}, row], "python -m x")
    text = (tmp_path / "README.md").read_text()
    assert text.startswith("# model\n\nHow it was made.") and text.count("## Lineage") == 1
    assert "| 1 | 3 | 1,200 | 5,000 | 20.0 | 1,000,000 | 0.6100 | 25.0 ± 0.4 | 90.0 ± 1.7 |" in text
    assert read_lineage(tmp_path)[1]["seed"] == 3 and used_seeds(json.loads((tmp_path / "lineage.json").read_text())) == {3}
    assert render_table([]).count("\n") == 1  # the header alone


def test_a_round_command_names_its_machine_paths_instead_of_giving_them(tmp_path):
    command = ("python -m rookworld.warm_start.round round.engine_path=/opt/sf/stockfish round.carry=[/tmp/a,/tmp/b] "
               "round.out=/tmp/round/out hydra.run.dir=/tmp/h round.seed=1 device=cuda model.path=./local")
    assert portable_command(command) == (
        "python -m rookworld.warm_start.round round.engine_path=ENGINE_PATH round.carry=[CARRY] round.out=OUT "
        "hydra.run.dir=RUN_DIR round.seed=1 device=cuda model.path=./local")
    write_model_card(tmp_path, "# model\n", [{"round": 0, "test": {}}, {"round": 1, "test": {}, "command": command}],
                     command)
    assert "/tmp/" not in (tmp_path / "README.md").read_text() + (tmp_path / "lineage.json").read_text()


def test_the_shipped_lineage_gives_no_machine_path_and_agrees_with_each_rounds_record():
    rows = read_lineage(ASSETS_DIR / "rookworld_tiny")
    card = (ASSETS_DIR / "rookworld_tiny" / "README.md").read_text()
    assert all(portable_command(row["command"]) == row["command"] for row in rows if "command" in row)
    assert "/tmp/" not in card.split("## Lineage")[1]
    for row in rows[1:]:
        record = REPO / "docs" / "runs" / f"warm_start_round_{row['round']}" / "round.json"
        if record.is_file():
            recorded = json.loads(record.read_text())["row"]
            assert {k: recorded[k] for k in ("new_positions", "carried_positions", "seed")} == \
                {k: row[k] for k in ("new_positions", "carried_positions", "seed")}, record
