"""Which model of tools/move_value_recipe.sh would ship, decided on the validation part alone.

    python tools/recipe_pick.py OUT [--alpha 0.01]

Reads OUT/*_sN/validation_scores.json and OUT/warm_start/validation_scores.json (VALIDATION=1; the whole
validation part with eval.score=chess). The arm (reward and steps) with the highest mean validation chess score
over its seeds, then that arm's seed with the highest score, is the candidate; it ships when the paired test of
a warm-start round (rookworld/warm_start/decision.py) against the warm start on the same problems gives a
one-sided p <= alpha. Prints each arm's mean and every decision line, and writes OUT/pick.json (the arms, the
candidate's folder and its decision). The test part plays no part in the choice."""
from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

from rookworld.judge.evaluate import EvalResult
from rookworld.warm_start.decision import decide

SCORES = "validation_scores.json"


def read(run: Path) -> tuple[EvalResult, list[str]]:
    data = json.loads((run / SCORES).read_text())
    return EvalResult(metrics=data["metrics"], problem_scores=data["problem_scores"]), data["tasks"]


def arms(out: Path) -> dict[str, dict[int, Path]]:
    """The runs ARM_sSEED with validation scores, by arm and seed (warm_start is no run)."""
    found: dict[str, dict[int, Path]] = {}
    for run in sorted(out.iterdir()):
        named = re.fullmatch(r"(.+)_s(\d+)", run.name)
        if named and (run / SCORES).is_file():
            found.setdefault(named[1], {})[int(named[2])] = run
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--alpha", type=float, default=0.01, help="the round's alpha (conf/round.yaml)")
    args = parser.parse_args()
    baseline, tasks = read(args.out / "warm_start")
    found = arms(args.out)
    if not found:
        raise SystemExit(f"{args.out}: no run with {SCORES} (run tools/move_value_recipe.sh with VALIDATION=1)")
    means = {arm: statistics.mean(read(run)[0].score for run in runs.values()) for arm, runs in found.items()}
    for arm, mean in sorted(means.items(), key=lambda item: -item[1]):
        print(f"{arm}: mean validation chess score {mean:.4f} over seeds {sorted(found[arm])} "
              f"(warm start {baseline.score:.4f})")
    arm = max(means, key=means.get)
    seed, run = max(found[arm].items(), key=lambda item: read(item[1])[0].score)
    candidate, candidate_tasks = read(run)
    if candidate_tasks != tasks:
        raise SystemExit(f"{run}: its validation problems differ from the warm start's")
    decision = decide(candidate, baseline, tasks, args.alpha)
    print(f"candidate: {run.name} (arm {arm}, seed {seed})")
    print(decision.line().replace("round ", "GRPO model ", 1))
    (args.out / "pick.json").write_text(json.dumps({"means": means, "arm": arm, "seed": seed, "run": run.name,
                                                    "decision": decision.as_dict()}, indent=1) + "\n")


if __name__ == "__main__":
    main()
