"""A shipped model's lineage: one row per round (or GRPO run that shipped) in the model folder's lineage.json, rendered as a table in its
README.md (the section "## Lineage", rewritten whole each time; the rest of the README is kept).

Each row: the round, its self-play seed, the new and carried positions, the minutes, the documents seen, the
validation chess scores the decision compared, and the whole test part's metrics with their standard errors
(greedy): best move, legal best move, format, top-5 overlap, win-probability loss, mate in one, A: exact next
state. Row 0 is the model as it was before its first round.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from rookworld.judge.evaluate import EvalResult

LINEAGE_FILE = "lineage.json"
SECTION = "## Lineage"
# (column, metric, task whose problem count gives a proportion's standard error, scale, digits)
TEST_COLUMNS = (
    ("best move", "eval/P/best_move", "P", 100, 1),
    ("legal best", "eval/P/legal_best", "P", 100, 1),
    ("format", "eval/P/format", "P", 100, 1),
    ("top-5", "eval/P/top5", "P", 100, 1),
    ("win-prob loss", "eval/P/win_prob_loss", "P", 1, 3),
    ("mate in one", "eval/P/mate_in_one", "P", 100, 1),
    ("A: exact", "eval/A/next_state", "A", 100, 1),
)


def lineage_metrics(result: EvalResult, tasks: list[str]) -> dict[str, list[float]]:
    """[value, standard error] of each lineage metric: the evaluation's own _se where it has one (skill means),
    else the binomial error of a proportion over that task's problems."""
    counts = {task: tasks.count(task) for task in ("P", "A")}
    metrics = {}
    for _, key, task, _, _ in TEST_COLUMNS:
        if key not in result.metrics:
            continue
        value = result.metrics[key]
        se = result.metrics.get(f"{key}_se")
        if se is None:
            se = math.sqrt(max(value * (1 - value), 0.0) / counts[task]) if counts[task] else 0.0
        metrics[key] = [value, se]
    return metrics


def read_lineage(folder: str | Path) -> list[dict]:
    path = Path(folder) / LINEAGE_FILE
    return json.loads(path.read_text()) if path.is_file() else []


def used_seeds(rows: list[dict]) -> set[int]:
    """The self-play seeds of the rounds (a GRPO row's seed is its run's, not self-play's)."""
    return {row["seed"] for row in rows if row.get("seed") is not None and row.get("method") != "GRPO"}


def next_round(rows: list[dict]) -> int:
    """The number of the next warm-start round (a GRPO row, named for its run, counts none)."""
    return 1 + max((row["round"] for row in rows if row.get("method") != "GRPO"), default=0)


def render_table(rows: list[dict]) -> str:
    header = ["round", "seed", "new positions", "carried", "minutes", "documents", "validation score"]
    header += [column for column, *_ in TEST_COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [str(row["round"]), _or_dash(row.get("seed")), _count(row.get("new_positions")),
                 _count(row.get("carried_positions")), _or_dash(row.get("minutes"), "{:.1f}"),
                 _count(row.get("documents")), _or_dash(row.get("validation_score"), "{:.4f}")]
        for _, key, _, scale, digits in TEST_COLUMNS:
            pair = row.get("test", {}).get(key)
            cells.append("-" if pair is None else f"{pair[0] * scale:.{digits}f} ± {pair[1] * scale:.{digits}f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def portable_command(command: str) -> str:
    """`command` with each override's machine path named instead (`round.carry=[/tmp/x]` -> `round.carry=[CARRY]`,
    `hydra.run.dir=/tmp/h` -> `hydra.run.dir=RUN_DIR`): a command another machine can read and fill in."""
    return " ".join(_portable(word) for word in command.split(" "))


def _portable(word: str) -> str:
    key, _, value = word.partition("=")
    if not value or not re.search(r"(^|[\[,])/", value):
        return word
    parts = key.lstrip("+~").split(".")
    name = "_".join(parts[-2:] if parts[-1] in ("dir", "path") and len(parts) > 1 else parts[-1:]).upper()
    return f"{key}=[{name}]" if value.startswith("[") else f"{key}={name}"


def write_model_card(folder: str | Path, readme: str, rows: list[dict], command: str) -> None:
    """lineage.json and README.md (`readme` with its lineage section replaced) in the model folder; every command
    in them without machine paths (portable_command)."""
    folder = Path(folder)
    rows = [{**row, "command": portable_command(row["command"])} if "command" in row else row for row in rows]
    command = portable_command(command)
    (folder / LINEAGE_FILE).write_text(json.dumps(rows, indent=1) + "\n")
    kept = readme.split(f"\n{SECTION}\n")[0].rstrip()
    section = (f"{SECTION}\n\nOne row per warm-start round (rookworld/warm_start/round.py) or GRPO run that shipped "
               f"(tools/recipe_ship.py); row 0 is the model before its first round. Test metrics: the whole self-play test part, greedy, in % (win-probability loss "
               f"in win probability), each ± its standard error; validation score: the chess score the round's "
               f"paired test decided on. The last row's command:\n\n    {command}\n\n{render_table(rows)}\n")
    (folder / "README.md").write_text(f"{kept}\n\n{section}")


def _or_dash(value, form: str = "{}") -> str:
    return "-" if value is None else form.format(value)


def _count(value) -> str:
    return "-" if value is None else f"{int(value):,}"
