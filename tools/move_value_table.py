"""The move-value recipe's table (tools/move_value_recipe.sh): the warm start, then reward=move_value and
reward=graduated over paired seeds, on the whole test part and in games against the engine levels.

    python tools/move_value_table.py OUT

Reads OUT/warm_start, OUT/{move_value,graduated}_sN and any longer arm OUT/move_value_STEPS_sN: the metrics
of test_scores.json and the `metrics {...}` line of play.log. Per metric: the warm start (greedy, so one
number), each arm's mean over its seeds with a 95% t-interval, move_value minus the warm start (t-interval,
one-sample t-test), move_value minus graduated and each longer arm minus move_value, paired by seed
(t-interval, paired t-test), and the relative change of the mean win-probability loss against the warm start."""
from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

from scipy import stats

from rookworld.stats.intervals import Estimate

REWARDS = ("move_value", "graduated")
METRICS = ["eval/P/best_move", "eval/P/legal_best", "eval/P/format", "eval/P/win_prob_loss", "eval/P/blunder",
           "eval/P/cp_loss_median", "eval/P/mate_in_one", "eval/P/only_move", "eval/A/next_state", "eval/score",
           "play/legal_move_rate", "play/self/legal_plies", "play/nodes_1/score", "play/nodes_1000/score", "play/elo"]


def run_metrics(run: Path) -> dict[str, float]:
    metrics = json.loads((run / "test_scores.json").read_text())["metrics"]
    play = run / "play.log"
    if play.is_file():
        found = re.findall(r"^metrics (\{.*\})$", play.read_text(), flags=re.M)
        metrics.update(json.loads(found[-1]) if found else {})
    return metrics


def seeded_runs(out: Path, arm: str) -> dict[int, dict[str, float]]:
    runs = {}
    for run in sorted(out.glob(f"{arm}_s*")):
        if (run / "test_scores.json").is_file():
            runs[int(run.name.rsplit("_s", 1)[1])] = run_metrics(run)
    return runs


def longer_arms(out: Path) -> list[str]:
    """move_value_STEPS arms, by their steps."""
    found = {run.name.rsplit("_s", 1)[0] for run in out.glob("move_value_*_s*")}
    return sorted((arm for arm in found if arm.removeprefix("move_value_").isdigit()),
                  key=lambda arm: int(arm.removeprefix("move_value_")))


def paired(a: dict[int, dict[str, float]], b: dict[int, dict[str, float]], key: str) -> list[float]:
    """a - b on `key` over the seeds both have."""
    return [a[s][key] - b[s][key] for s in sorted(set(a) & set(b)) if key in a[s] and key in b[s]]


def interval(values: list[float]) -> tuple[float, float, float, float]:
    """Mean, 95% t-interval (the sweep report's Estimate) and the two-sided one-sample t-test's p
    against 0 (nan below two values, and where every value is the same: the test is undefined)."""
    estimate = Estimate.of(dict(enumerate(values)))
    varies = len(set(values)) > 1
    p = float(stats.ttest_1samp(values, 0.0).pvalue) if varies else math.nan
    return estimate.mean, estimate.low, estimate.high, p


def cell(values: list[float], with_p: bool = False) -> str:
    mean, low, high, p = interval(values)
    if math.isnan(low):
        return f"{mean:+.4f}" if with_p else f"{mean:.4f}"
    text = f"{mean:+.4f} [{low:+.4f}, {high:+.4f}]" if with_p else f"{mean:.4f} [{low:.4f}, {high:.4f}]"
    return text + (f", p={p:.3g}" if with_p and not math.isnan(p) else "")


def table(out: Path) -> str:
    warm = run_metrics(out / "warm_start")
    arms = [*REWARDS, *longer_arms(out)]
    runs = {arm: seeded_runs(out, arm) for arm in arms}
    if not runs["move_value"]:
        raise SystemExit(f"{out}: no finished move_value_sN run (test_scores.json)")
    both = sorted(set(runs["move_value"]) & set(runs["graduated"]))
    longer = arms[len(REWARDS):]
    lines = [f"seeds: move_value {sorted(runs['move_value'])}, graduated {sorted(runs['graduated'])}, paired {both}"
             + "".join(f", {arm} {sorted(runs[arm])}" for arm in longer),
             "",
             "| metric | warm start | " + " | ".join(f"{arm}, mean [95% CI]" for arm in arms)
             + " | move_value - warm start | move_value - graduated (paired) | "
             + " | ".join(f"{arm} - move_value (paired)" for arm in longer) + (" |" if longer else "|"),
             "|---|---:|" + "---:|" * (len(arms) + 2 + len(longer))]
    for key in METRICS:
        if key not in warm:
            continue
        means = [[m[key] for m in runs[arm].values() if key in m] for arm in arms]
        mv = means[0]
        differences = [paired(runs["move_value"], runs["graduated"], key),
                       *(paired(runs[arm], runs["move_value"], key) for arm in longer)]
        lines.append(f"| {key} | {warm[key]:.4f} | " + " | ".join(cell(v) if v else "" for v in means)
                     + f" | {cell([v - warm[key] for v in mv], True) if mv else ''} | "
                     + " | ".join(cell(d, True) if d else "" for d in differences) + " |")
    loss = "eval/P/win_prob_loss"
    if loss in warm and warm[loss] > 0:
        relative = [m[loss] / warm[loss] - 1 for m in runs["move_value"].values()]
        lines += ["", f"move_value's win-probability loss relative to the warm start: {cell(relative, True)}"]
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(table(Path(sys.argv[1])))
