"""Summaries of a sweep: the child runs of one MLflow parent run.

    client = MlflowClient(tracking_uri)
    summary = summarise_children(client, parent_run_id, direction="maximize")
    print(summary_markdown(summary))
    log_summary(client, summary)       # metrics, tags and artifacts `sweep_summary/` on the parent

    study_summary = summarise_study(optuna_study, fetch_study_runs(client, experiment_id, name))
    print(study_markdown(study_summary))       # every trial of an Optuna study: state, outcome
    log_study_summary(client, parent_run_id, study_summary)

A trial's objective is its `objective` metric (the trainer logs eval/score, or the failure
penalty); its outcome is its `rookworld.outcome` tag. Swept parameters are the params whose value
differs between children (git.* and trial.number left out).

The Optuna part (rookworld's sweeper, rookworld/sweep/sweeper.py) summarises a whole study, over
every sweep invocation that ran it: each trial's Optuna state (COMPLETE, PRUNED, FAIL, RUNNING,
WAITING), objective, last step reported to the pruner, and the outcome of its latest MLflow run
(matched by the `rookworld.study` and `rookworld.trial` tags).
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from rookworld.tracking import (
    MAX_PARAMS_TAGS_PER_BATCH,
    MAX_TAG_LENGTH,
    OUTCOME_TAG,
    PARENT_TAG,
    ROLE_TAG,
    STOP_REASON_TAG,
    STUDY_TAG,
    TRIAL_TAG,
)
from rookworld.outcomes import (DIVERGED_ENTROPY, DIVERGED_GRAD_NORM, DIVERGED_KL_GROWTH, DIVERGED_REWARD, FAILED,
                                KL_FAILURE, NAN_FAILURE, OUTCOMES, PRUNED, RUNNING, SUCCESS)

if TYPE_CHECKING:
    import optuna
    from matplotlib.axes import Axes
    from mlflow import MlflowClient
    from mlflow.entities import Run
    from optuna.trial import FrozenTrial

DIRECTIONS = ("maximize", "minimize")
OBJECTIVE_METRIC = "objective"
REWARD_METRIC = "reward"
SUMMARY_ARTIFACT_DIR = "sweep_summary"
_NOT_SWEPT_PREFIXES = ("git.",)
_NOT_SWEPT = ("trial.number", "checkpoint.dir")  # checkpoint.dir: each job's own output dir
_MAX_PARAM_PLOTS = 12
OUTCOME_COLORS = {
    SUCCESS: "tab:green",
    KL_FAILURE: "tab:orange",
    NAN_FAILURE: "tab:red",
    DIVERGED_KL_GROWTH: "tab:brown",
    DIVERGED_ENTROPY: "tab:pink",
    DIVERGED_GRAD_NORM: "tab:olive",
    DIVERGED_REWARD: "tab:cyan",
    PRUNED: "tab:gray",
    FAILED: "black",
    RUNNING: "tab:blue",
}


@dataclass(frozen=True)
class TrialResult:
    run_id: str
    trial: int | None
    outcome: str
    stop_reason: str
    status: str
    objective: float | None
    params: dict[str, str]
    start_time: int


@dataclass(frozen=True)
class SweepSummary:
    parent_run_id: str
    study: str
    direction: str
    trials: tuple[TrialResult, ...]
    swept_params: tuple[str, ...]
    log_scale: tuple[str, ...] = ()  # params swept on a log scale: log axes in the plots

    @property
    def counts(self) -> dict[str, int]:
        """Trials per outcome, every known outcome included (0 when absent)."""
        found = Counter(t.outcome for t in self.trials)
        return {**{o: found.get(o, 0) for o in OUTCOMES}, **found}

    def ranked(self) -> list[TrialResult]:
        """Successful trials with an objective, best first (a pruned or failed trial is never best)."""
        scored = [t for t in self.trials if t.objective is not None and t.outcome == SUCCESS]
        return sorted(scored, key=lambda t: t.objective, reverse=self.direction == "maximize")

    @property
    def best(self) -> TrialResult | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None


# ---------------------------------------------------------------- reading the children


def normalise_direction(direction: Any) -> str:
    """'maximize' / 'minimize' from a string, an enum (Optuna's Direction) or a list (first)."""
    if isinstance(direction, (list, tuple)) or type(direction).__name__ == "ListConfig":
        direction = list(direction)[0]
    name = getattr(direction, "name", direction)
    name = str(name).lower()
    if name not in DIRECTIONS:
        raise ValueError(f"sweep direction must be one of {DIRECTIONS}, got {direction!r}")
    return name


def search_all_runs(client: MlflowClient, experiment_id: str, query: str) -> list[Run]:
    """Every run matching `query`, across result pages."""
    runs: list[Run] = []
    token = None
    while True:
        page = client.search_runs([experiment_id], query, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def trial_result(run: Run) -> TrialResult:
    tags, metrics = run.data.tags, run.data.metrics
    objective = metrics.get(OBJECTIVE_METRIC)
    trial = tags.get(TRIAL_TAG)
    return TrialResult(
        run_id=run.info.run_id,
        trial=int(trial) if trial is not None and trial.lstrip("-").isdigit() else None,
        outcome=tags.get(OUTCOME_TAG, RUNNING),
        stop_reason=tags.get(STOP_REASON_TAG, ""),
        status=run.info.status,
        objective=None if objective is None or math.isnan(objective) else float(objective),
        params=dict(run.data.params),
        start_time=run.info.start_time or 0,
    )


def swept_params(trials: Sequence[TrialResult]) -> tuple[str, ...]:
    """Param keys whose value differs between trials (missing counts as a value)."""
    keys = sorted({k for t in trials for k in t.params})
    varying = [k for k in keys if len({t.params.get(k) for t in trials}) > 1]
    return tuple(k for k in varying if k not in _NOT_SWEPT and not k.startswith(_NOT_SWEPT_PREFIXES))


def summarise_children(
    client: MlflowClient, parent_run_id: str, direction: Any = "maximize", log_scale: Sequence[str] = ()
) -> SweepSummary:
    parent = client.get_run(parent_run_id)
    children = search_all_runs(client, parent.info.experiment_id, f"tags.{PARENT_TAG} = '{parent_run_id}'")
    trials = sorted(
        (trial_result(run) for run in children),
        key=lambda t: (t.trial is None, t.trial or 0, t.start_time),
    )
    return SweepSummary(
        parent_run_id=parent_run_id,
        study=parent.data.tags.get(STUDY_TAG, parent.info.run_name or parent_run_id),
        direction=normalise_direction(direction),
        trials=tuple(trials),
        swept_params=swept_params(trials),
        log_scale=tuple(log_scale),
    )


# ---------------------------------------------------------------- text


def _fmt_objective(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _fmt_number_text(text: str | None) -> str:
    """An MLflow param (text) rounded to 4 significant digits when it is a non-integer number."""
    if text is None:
        return "-"
    try:
        value = float(text)
    except ValueError:
        return text
    return text if value.is_integer() and "e" not in text.lower() and "." not in text else f"{value:.4g}"


def summary_markdown(summary: SweepSummary) -> str:
    counts = ", ".join(f"{o} {n}" for o, n in summary.counts.items() if n)
    best = summary.best
    lines = [
        f"# Sweep {summary.study}",
        "",
        f"{len(summary.trials)} trials ({counts or 'none'}); objective: {summary.direction}.",
    ]
    if best is not None:
        chosen = ", ".join(f"{k}={_fmt_number_text(best.params.get(k))}" for k in summary.swept_params)
        lines.append(
            f"Best: trial {best.trial} objective {_fmt_objective(best.objective)}"
            f" ({chosen or 'no swept params'}), run {best.run_id}."
        )
    else:
        lines.append("Best: none (no trial succeeded).")
    header = ["trial", "outcome", "objective", *summary.swept_params, "run", "stop reason"]
    rows = [["-" if t.trial is None else str(t.trial), t.outcome, _fmt_objective(t.objective),
             *(_fmt_number_text(t.params.get(k)) for k in summary.swept_params), t.run_id[:8], t.stop_reason]
            for t in summary.trials]
    return "\n".join(lines + [""] + markdown_table(header, rows)) + "\n"


def markdown_table(header: list[str], rows: list[list[str]], max_cell: int = 80) -> list[str]:
    """Lines of a markdown table; cells are cut to max_cell characters and may not contain '|'."""
    def cell(text: str) -> str:
        return str(text)[:max_cell].replace("|", "/")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]


def summary_dict(summary: SweepSummary) -> dict[str, Any]:
    best = summary.best
    return {
        "parent_run_id": summary.parent_run_id,
        "study": summary.study,
        "direction": summary.direction,
        "counts": summary.counts,
        "swept_params": list(summary.swept_params),
        "best": asdict(best) if best is not None else None,
        "trials": [asdict(t) for t in summary.trials],
    }


# ---------------------------------------------------------------- plots


_CURVE_DASHES = ("-", "--", ":", "-.")
_CURVE_MARKERS = ("o", "s", "^", "v", "D")


def _new_figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _x_positions(trials: Sequence[TrialResult]) -> list[int]:
    return [t.trial if t.trial is not None else i for i, t in enumerate(trials)]


def _outcome_legend(axes: Axes, outcomes: set[str]) -> None:
    """A legend of the outcome colours, after the axes' own labelled lines (e.g. the running best)."""
    from matplotlib.lines import Line2D

    handles = [line for line in axes.get_lines() if not line.get_label().startswith("_")]
    handles += [
        Line2D([], [], marker="o", linestyle="", color=OUTCOME_COLORS.get(o, "tab:purple"), label=o)
        for o in sorted(outcomes)
    ]
    axes.legend(handles=handles, fontsize="small")


def _floor(summary: SweepSummary) -> float:
    """Where trials without an objective are drawn: a little below the lowest objective."""
    scored = [t.objective for t in summary.trials if t.objective is not None]
    if not scored:
        return 0.0
    return min(scored) - 0.1 * ((max(scored) - min(scored)) or 1.0)


def _scatter_trial(axes: Axes, x: float, trial: TrialResult, floor: float) -> None:
    color = OUTCOME_COLORS.get(trial.outcome, "tab:purple")
    y, marker = (floor, "x") if trial.objective is None else (trial.objective, "o")
    axes.scatter(x, y, color=color, marker=marker, zorder=3)


def plot_optimisation_history(summary: SweepSummary, path: Path) -> Path:
    """Objective per trial (coloured by outcome; x: no objective) and the running best."""
    optimisation_history_figure(summary).savefig(path, dpi=110)
    return path


def optimisation_history_figure(summary: SweepSummary) -> Any:
    """The figure of plot_optimisation_history."""
    from matplotlib.ticker import MaxNLocator

    figure = _new_figure(7, 4)
    axes = figure.add_subplot()
    floor = _floor(summary)
    better = max if summary.direction == "maximize" else min
    best_x, best_y, running = [], [], None
    for x, t in zip(_x_positions(summary.trials), summary.trials):
        _scatter_trial(axes, x, t, floor)
        if t.objective is not None and t.outcome == SUCCESS:  # the running best of successful trials only
            running = t.objective if running is None else better(running, t.objective)
            best_x.append(x)
            best_y.append(running)
    axes.step(best_x, best_y, where="post", color="tab:blue", label="running best")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set(xlabel="trial", ylabel=OBJECTIVE_METRIC, title=f"Optimisation history ({summary.direction})")
    _outcome_legend(axes, {t.outcome for t in summary.trials})
    figure.suptitle(summary.study, fontsize="small")
    return figure


def _axis_values(values: list[str | None]) -> tuple[list[float], list[str] | None]:
    """Numeric positions for param values; categories (sorted) when not all numeric."""
    try:
        return [math.nan if v is None else float(v) for v in values], None
    except ValueError:
        categories = sorted({str(v) for v in values})
        return [float(categories.index(str(v))) for v in values], categories


def plot_outcome_vs_params(summary: SweepSummary, path: Path) -> Path:
    """One panel per swept param: objective against value, coloured by outcome (no objective: x)."""
    outcome_vs_params_figure(summary).savefig(path, dpi=110)
    return path


def outcome_vs_params_figure(summary: SweepSummary) -> Any:
    """The figure of plot_outcome_vs_params; log-swept params on log axes."""
    params = summary.swept_params[:_MAX_PARAM_PLOTS] or ("(none swept)",)
    columns = min(3, len(params))
    rows = math.ceil(len(params) / columns)
    figure = _new_figure(4.2 * columns, 3.4 * rows)
    floor = _floor(summary)
    for index, key in enumerate(params):
        axes = figure.add_subplot(rows, columns, index + 1)
        xs, categories = _axis_values([t.params.get(key) for t in summary.trials])
        for x, t in zip(xs, summary.trials):
            _scatter_trial(axes, x, t, floor)
        if categories is not None:
            axes.set_xticks(range(len(categories)), categories, rotation=30, fontsize="small")
        elif key in summary.log_scale:
            from matplotlib.ticker import LogLocator, NullFormatter

            axes.set_xscale("log")
            axes.xaxis.set_major_locator(LogLocator(numticks=4))
            axes.xaxis.set_minor_formatter(NullFormatter())  # labelled minor ticks collide within a decade
        axes.set(xlabel=key, ylabel=OBJECTIVE_METRIC)
    _outcome_legend(figure.axes[0], {t.outcome for t in summary.trials})
    figure.suptitle(f"Objective and outcome against swept parameters\n{summary.study}", fontsize="small")
    return figure


def plot_reward_curves(
    client: MlflowClient, summary: SweepSummary, path: Path, top_k: int = 5
) -> Path:
    """`reward` against step for the best `top_k` trials."""
    reward_curves_figure(client, summary, top_k).savefig(path, dpi=110)
    return path


def reward_curves_figure(client: MlflowClient, summary: SweepSummary, top_k: int) -> Any:
    """The figure of plot_reward_curves: whole steps on the x axis; each curve its own dashes and markers, so that
    identical curves stay visible."""
    from matplotlib.ticker import MaxNLocator

    figure = _new_figure(7, 4)
    axes = figure.add_subplot()
    for index, t in enumerate(summary.ranked()[:top_k]):
        history = sorted(client.get_metric_history(t.run_id, REWARD_METRIC), key=lambda m: m.step)
        label = f"trial {t.trial}: {t.outcome}, {OBJECTIVE_METRIC} {_fmt_objective(t.objective)}"
        axes.plot([m.step for m in history], [m.value for m in history], label=label,
                  linestyle=_CURVE_DASHES[index % len(_CURVE_DASHES)], marker=_CURVE_MARKERS[index % len(_CURVE_MARKERS)],
                  markersize=4, alpha=0.85)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set(xlabel="step", ylabel=REWARD_METRIC, title=f"Reward of the best {top_k} trials")
    figure.suptitle(summary.study, fontsize="small")
    if axes.lines:
        axes.legend(fontsize="small")
    return figure


# ---------------------------------------------------------------- logging to the parent


def write_summary_files(
    client: MlflowClient, summary: SweepSummary, directory: Path, top_k: int = 5
) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    markdown = directory / "summary.md"
    markdown.write_text(summary_markdown(summary))
    data = directory / "summary.json"
    data.write_text(json.dumps(summary_dict(summary), indent=2))
    return [
        markdown,
        data,
        plot_optimisation_history(summary, directory / "optimisation_history.png"),
        plot_outcome_vs_params(summary, directory / "outcome_vs_params.png"),
        plot_reward_curves(client, summary, directory / "reward_curves.png", top_k),
    ]


def _log_values_and_tags(
    client: MlflowClient, run_id: str, values: dict[str, Any], tags: dict[str, str], step: int
) -> None:
    """`values` as metrics at `step` (one batch) and `tags` (cut to MLflow's tag length) on a run."""
    from mlflow.entities import Metric, RunTag

    timestamp = time.time_ns() // 1_000_000
    client.log_batch(run_id, metrics=[Metric(k, float(v), timestamp, step) for k, v in values.items()])
    items = [RunTag(k, v[:MAX_TAG_LENGTH]) for k, v in tags.items()]
    for start in range(0, len(items), MAX_PARAMS_TAGS_PER_BATCH):
        client.log_batch(run_id, tags=items[start : start + MAX_PARAMS_TAGS_PER_BATCH])


def log_summary(client: MlflowClient, summary: SweepSummary, top_k: int = 5) -> None:
    """Counts (metrics), best trial (metric + tags) and files (artifacts) on the parent run.

    Only metrics and tags are used, so summarising a study again updates it in place.
    """
    run_id = summary.parent_run_id
    with tempfile.TemporaryDirectory(prefix="rookworld-sweep-") as tmp:
        write_summary_files(client, summary, Path(tmp), top_k)
        client.log_artifacts(run_id, tmp, SUMMARY_ARTIFACT_DIR)
    values = {"sweep.n_trials": len(summary.trials)}
    values.update({f"sweep.n_{o}": n for o, n in summary.counts.items()})
    tags = {"sweep.direction": summary.direction}
    best = summary.best
    if best is not None:
        values["sweep.best_objective"] = best.objective
        tags.update({"sweep.best_run_id": best.run_id, "sweep.best_trial": str(best.trial)})
        tags.update({f"sweep.best.{k}": _fmt_number_text(best.params.get(k, "")) for k in summary.swept_params})
    _log_values_and_tags(client, run_id, values, tags, step=len(summary.trials))


# ---------------------------------------------------------------- an Optuna study (rookworld's sweeper)

OPTUNA_STATES = ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "WAITING")
STUDY_ARTIFACT = "optuna_study"
_NO_RUN = "-"


@dataclass(frozen=True)
class StudyTrial:
    number: int
    state: str  # Optuna state: COMPLETE, PRUNED, FAIL, RUNNING, WAITING
    value: float | None  # the objective told to Optuna (COMPLETE only)
    last_step: int | None  # training step of the last report to the pruner (where a pruned trial stopped)
    outcome: str  # rookworld.outcome of its latest MLflow run, else the trial's user attr `rookworld:outcome`; "-" if neither
    params: dict[str, Any]  # swept params, trial.number left out
    note: str  # why it failed, which trial it retries


@dataclass(frozen=True)
class StudySummary:
    """Every trial of an Optuna study, whatever sweep invocation ran it, with its MLflow outcome."""

    study: str
    direction: str
    trials: tuple[StudyTrial, ...]

    @property
    def state_counts(self) -> dict[str, int]:
        found = Counter(t.state for t in self.trials)
        return {**{s: found.get(s, 0) for s in OPTUNA_STATES}, **found}

    @property
    def outcome_counts(self) -> dict[str, int]:
        return dict(Counter(t.outcome for t in self.trials if t.outcome != _NO_RUN))

    @property
    def finished(self) -> int:
        return sum(t.state in ("COMPLETE", "PRUNED", "FAIL") for t in self.trials)

    @property
    def best(self) -> StudyTrial | None:
        """The best COMPLETE trial that succeeded (a guard-stopped trial is COMPLETE with the failure penalty)."""
        complete = [t for t in self.trials if t.state == "COMPLETE" and t.value is not None
                    and t.outcome in (SUCCESS, _NO_RUN)]
        pick = max if self.direction == "maximize" else min
        return pick(complete, key=lambda t: t.value) if complete else None

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(sorted({k for t in self.trials for k in t.params}))


def fetch_study_runs(client: MlflowClient, experiment_id: str, study: str) -> list[Run]:
    """All trial runs of a study in an experiment, across sweep invocations (parents)."""
    return search_all_runs(client, experiment_id, f"tags.`{STUDY_TAG}` = '{study}' and tags.`{ROLE_TAG}` = 'trial'")


def trial_outcomes(runs: Sequence[Run]) -> dict[int, str]:
    """Trial number -> outcome of its latest run."""
    latest: dict[int, Run] = {}
    for run in runs:
        trial = trial_result(run).trial
        if trial is not None and (trial not in latest or run.info.start_time > latest[trial].info.start_time):
            latest[trial] = run
    return {n: run.data.tags.get(OUTCOME_TAG, RUNNING) for n, run in latest.items()}


def _trial_note(trial: FrozenTrial) -> str:
    from rookworld.sweep.study import FAIL_REASON_ATTR, RETRY_OF_ATTR

    notes = []
    if FAIL_REASON_ATTR in trial.user_attrs:
        notes.append(str(trial.user_attrs[FAIL_REASON_ATTR]))
    if RETRY_OF_ATTR in trial.user_attrs:
        notes.append(f"retry of trial {trial.user_attrs[RETRY_OF_ATTR]}")
    return "; ".join(notes)


def study_trial(trial: FrozenTrial, outcome: str) -> StudyTrial:
    """`outcome`: its MLflow run's; without one, the outcome its job recorded on the trial (if any)."""
    from rookworld.sweep.study import OUTCOME_ATTR, STEP_ATTR

    if outcome == _NO_RUN:
        outcome = str(trial.user_attrs.get(OUTCOME_ATTR, _NO_RUN))
    steps = trial.intermediate_values
    return StudyTrial(
        number=trial.number,
        state=trial.state.name,
        value=trial.value if trial.state.name == "COMPLETE" else None,
        last_step=trial.user_attrs.get(STEP_ATTR, max(steps) if steps else None),
        outcome=outcome,
        params={k: v for k, v in trial.params.items() if k not in _NOT_SWEPT},
        note=_trial_note(trial),
    )


def summarise_study(study: optuna.Study, runs: Sequence[Run] | None = None) -> StudySummary:
    """The study's trials (Optuna states and values) joined with their MLflow runs' outcomes."""
    outcomes = trial_outcomes(runs or [])
    return StudySummary(
        study=study.study_name,
        direction=normalise_direction(study.direction),
        trials=tuple(study_trial(t, outcomes.get(t.number, _NO_RUN)) for t in study.get_trials(deepcopy=False)),
    )


def _fmt_param(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def study_markdown(summary: StudySummary) -> str:
    states = ", ".join(f"{s} {n}" for s, n in summary.state_counts.items() if n)
    outcomes = ", ".join(f"{o} {n}" for o, n in sorted(summary.outcome_counts.items()))
    lines = [
        f"# Optuna study {summary.study}",
        "",
        f"{len(summary.trials)} trials; Optuna states: {states or 'none'}; "
        f"MLflow outcomes: {outcomes or 'no runs found'}; objective: {summary.direction}.",
    ]
    best = summary.best
    if best is not None:
        chosen = ", ".join(f"{k}={_fmt_param(v)}" for k, v in best.params.items())
        lines.append(f"Best: trial {best.number}, objective {_fmt_objective(best.value)} ({chosen or 'no params'}).")
    else:
        lines.append("Best: none (no trial finished successfully).")
    header = ["trial", "state", "objective", "outcome", "last step", *summary.param_names, "note"]
    rows = [[str(t.number), t.state, _fmt_objective(t.value), t.outcome,
             "-" if t.last_step is None else str(t.last_step),
             *(_fmt_param(t.params[k]) if k in t.params else "-" for k in summary.param_names), t.note]
            for t in summary.trials]
    return "\n".join(lines + [""] + markdown_table(header, rows)) + "\n"


def study_dict(summary: StudySummary) -> dict[str, Any]:
    best = summary.best
    return {
        "study": summary.study,
        "direction": summary.direction,
        "state_counts": summary.state_counts,
        "outcome_counts": summary.outcome_counts,
        "best": asdict(best) if best is not None else None,
        "trials": [asdict(t) for t in summary.trials],
    }


def log_study_summary(client: MlflowClient, parent_run_id: str, summary: StudySummary) -> None:
    """Optuna state counts and best trial (metrics `sweep.optuna.*`, tags) and the table
    (`sweep_summary/optuna_study.md`, `.json`) on the sweep's parent run."""
    with tempfile.TemporaryDirectory(prefix="rookworld-study-") as tmp:
        (Path(tmp) / f"{STUDY_ARTIFACT}.md").write_text(study_markdown(summary))
        (Path(tmp) / f"{STUDY_ARTIFACT}.json").write_text(json.dumps(study_dict(summary), indent=2, default=str))
        client.log_artifacts(parent_run_id, tmp, SUMMARY_ARTIFACT_DIR)
    values = {f"sweep.optuna.n_{s.lower()}": n for s, n in summary.state_counts.items()}
    tags = {}
    best = summary.best
    if best is not None:
        values["sweep.optuna.best_value"] = best.value
        tags["sweep.optuna.best_trial"] = str(best.number)
        tags.update({f"sweep.optuna.best.{k}": _fmt_param(v) for k, v in best.params.items()})
    _log_values_and_tags(client, parent_run_id, values, tags, step=len(summary.trials))
