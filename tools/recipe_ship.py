"""The model tools/recipe_pick.py picked becomes the shipped rookworld_tiny: a new row of its lineage.

    python tools/recipe_ship.py OUT MODEL [--into rookworld/assets/rookworld_tiny] [--steps 400] [--min-a-exact 0.875]

OUT: the recipe's folder (pick.json, warm_start/ and the picked run's test_scores.json, from the whole test part);
MODEL: that run's final model folder (hub format). Refused, with nothing written, unless the pick's paired test on
the validation part says it ships and its A: exact next state on the test part is at least --min-a-exact. Then the
weights, config and tokenizer of MODEL replace those in --into, and lineage.json and README.md gain the row
"GRPO (reward, steps), seed, from round N" with the validation scores the test compared and the test metrics
(rookworld/warm_start/lineage.py). --steps: the steps of an arm whose name carries none (move_value, graduated).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

from rookworld.judge.evaluate import EvalResult
from rookworld.warm_start import lineage

COPIED = ("config.json", "tokenizer.json", "model.safetensors", "model.safetensors.index.json")


def read_scores(path: Path) -> tuple[EvalResult, list[str]]:
    data = json.loads(path.read_text())
    return EvalResult(metrics=data["metrics"], problem_scores=data["problem_scores"]), data["tasks"]


def grpo_row(pick: dict, test: EvalResult, tasks: list[str], steps: int, parent: dict) -> dict:
    named = re.fullmatch(r"(.+?)_(\d+)", pick["arm"])
    reward, steps = (named[1], int(named[2])) if named else (pick["arm"], steps)
    decision = pick["decision"]
    command = (f"python -m rookworld.train experiment=grpo_move_value reward={reward} seed={pick['seed']} "
               f"steps={steps} model.path=rookworld/assets/rookworld_tiny")
    return {"round": f"GRPO ({reward}, {steps} steps, from round {parent['round']})", "method": "GRPO",
            "reward": reward, "steps": steps, "seed": pick["seed"], "from": parent["round"],
            "validation_score": decision["candidate"], "validation_baseline": decision["baseline"],
            "p_value": decision["p_value"], "test": lineage.lineage_metrics(test, tasks), "command": command}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("model", type=Path)
    parser.add_argument("--into", type=Path, default=Path("rookworld/assets/rookworld_tiny"))
    parser.add_argument("--steps", type=int, default=400, help="the steps of an arm named without them")
    parser.add_argument("--min-a-exact", type=float, default=0.875, help="the least A: exact next state on test")
    args = parser.parse_args()
    pick = json.loads((args.out / "pick.json").read_text())
    if not pick["decision"]["ship"]:
        raise SystemExit(f"{pick['run']}: the paired validation test does not ship it "
                         f"(p={pick['decision']['p_value']:.3g} > alpha={pick['decision']['alpha']})")
    test, tasks = read_scores(args.out / pick["run"] / "test_scores.json")
    a_exact = test.metrics["eval/A/next_state"]
    if a_exact < args.min_a_exact:
        raise SystemExit(f"{pick['run']}: A: exact {a_exact:.4f} on the test part falls below --min-a-exact="
                         f"{args.min_a_exact}")
    weights = sorted(args.model.glob("model*.safetensors"))
    if not weights or not (args.model / "config.json").is_file():
        raise SystemExit(f"{args.model}: no hub-format model (config.json and model*.safetensors)")
    rows = lineage.read_lineage(args.into)
    row = grpo_row(pick, test, tasks, args.steps, rows[-1])
    for stale in args.into.glob("model*.safetensors*"):
        stale.unlink()
    for path in weights + [args.model / name for name in COPIED if (args.model / name).is_file()]:
        shutil.copy2(path, args.into / path.name)
    readme = (args.into / "README.md").read_text()
    lineage.write_model_card(args.into, readme, rows + [row], row["command"])
    print(f"{args.into}: {row['round']}, seed {row['seed']}: validation {row['validation_baseline']:.4f} -> "
          f"{row['validation_score']:.4f} (p={row['p_value']:.2g}); test best move "
          f"{row['test']['eval/P/best_move'][0]:.1%}, legal best {row['test']['eval/P/legal_best'][0]:.1%}, "
          f"A: exact {a_exact:.1%}")


if __name__ == "__main__":
    main()
