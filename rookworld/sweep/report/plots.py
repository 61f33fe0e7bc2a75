"""The plots of a sweep summary (rookworld/sweep/report/summary.py), logged on its parent run under
`sweep_summary/`: the optimisation history, the objective against each swept param, and the reward
curves of the best trials. Trials are coloured by outcome; one without an objective, or whose objective
is the failure penalty (a failed or guard-stopped run), is an x below the lowest real objective, so the
penalty never sets the axis."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import LogLocator, MaxNLocator, NullFormatter

from rookworld.outcomes import (DIVERGED_ENTROPY, DIVERGED_GRAD_NORM, DIVERGED_KL_GROWTH, DIVERGED_REWARD, FAILED,
                                KL_FAILURE, NAN_FAILURE, OBJECTIVE_METRIC, PRUNED, RUNNING, SUCCESS)
from rookworld.sweep.report.summary import NO_RUN, SweepSummary, TrialRow, format_objective

if TYPE_CHECKING:
    from mlflow import MlflowClient

REWARD_METRIC = "reward"
MAX_PARAM_PLOTS = 12
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
_CURVE_DASHES = ("-", "--", ":", "-.")
_CURVE_MARKERS = ("o", "s", "^", "v", "D")


def write_plots(client: MlflowClient, summary: SweepSummary, directory: Path, top_k: int) -> list[Path]:
    """optimisation_history.png, outcome_vs_params.png and reward_curves.png in `directory`."""
    figures = {
        "optimisation_history.png": optimisation_history_figure(summary),
        "outcome_vs_params.png": outcome_vs_params_figure(summary),
        "reward_curves.png": reward_curves_figure(client, summary, top_k),
    }
    for name, figure in figures.items():
        figure.savefig(directory / name, dpi=110)
    return [directory / name for name in figures]


def _new_figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _x_positions(trials: Sequence[TrialRow]) -> list[int]:
    return [t.trial if t.trial is not None else i for i, t in enumerate(trials)]


def _outcome_legend(axes: Axes, outcomes: set[str]) -> None:
    """A legend of the outcome colours, after the axes' own labelled lines (e.g. the running best)."""
    handles = [line for line in axes.get_lines() if not line.get_label().startswith("_")]
    handles += [
        Line2D([], [], marker="o", linestyle="", color=OUTCOME_COLORS.get(o, "tab:purple"), label=o)
        for o in sorted(outcomes)
    ]
    axes.legend(handles=handles, fontsize="small")


def _score(trial: TrialRow) -> float | None:
    """The objective drawn as a point: an eval/score (a finished, pruned or untracked trial's), not a penalty."""
    return trial.objective if trial.outcome in (SUCCESS, PRUNED, RUNNING, NO_RUN) else None


def _floor(summary: SweepSummary) -> float:
    """Where the other trials are drawn: a little below the lowest score."""
    scored = [_score(t) for t in summary.trials if _score(t) is not None]
    if not scored:
        return 0.0
    return min(scored) - 0.1 * ((max(scored) - min(scored)) or 1.0)


def _scatter_trial(axes: Axes, x: float, trial: TrialRow, floor: float) -> None:
    color = OUTCOME_COLORS.get(trial.outcome, "tab:purple")
    y, marker = (floor, "x") if _score(trial) is None else (_score(trial), "o")
    axes.scatter(x, y, color=color, marker=marker, zorder=3)


def optimisation_history_figure(summary: SweepSummary) -> Figure:
    """Objective per trial (coloured by outcome; x: no score) and the running best."""
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


def _axis_values(values: list[Any]) -> tuple[list[float], list[str] | None]:
    """Numeric positions for param values; categories (sorted) when not all numeric."""
    try:
        return [math.nan if v is None else float(v) for v in values], None
    except ValueError:
        categories = sorted({str(v) for v in values})
        return [float(categories.index(str(v))) for v in values], categories


def outcome_vs_params_figure(summary: SweepSummary) -> Figure:
    """One panel per swept param: objective against value, coloured by outcome (no score: x); log-swept
    params on log axes."""
    params = summary.params[:MAX_PARAM_PLOTS] or ("(none swept)",)
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
            axes.set_xscale("log")
            axes.xaxis.set_major_locator(LogLocator(numticks=4))
            axes.xaxis.set_minor_formatter(NullFormatter())  # labelled minor ticks collide within a decade
        axes.set(xlabel=key, ylabel=OBJECTIVE_METRIC)
    _outcome_legend(figure.axes[0], {t.outcome for t in summary.trials})
    figure.suptitle(f"Objective and outcome against swept parameters\n{summary.study}", fontsize="small")
    return figure


def reward_curves_figure(client: MlflowClient, summary: SweepSummary, top_k: int) -> Figure:
    """`reward` against step for the best `top_k` trials: whole steps on the x axis; each curve its own dashes
    and markers, so that identical curves stay visible."""
    figure = _new_figure(7, 4)
    axes = figure.add_subplot()
    for index, t in enumerate(summary.ranked()[:top_k]):
        history = sorted(client.get_metric_history(t.run_id, REWARD_METRIC), key=lambda m: m.step)
        label = f"trial {t.trial}: {t.outcome}, {OBJECTIVE_METRIC} {format_objective(t.objective)}"
        axes.plot([m.step for m in history], [m.value for m in history], label=label,
                  linestyle=_CURVE_DASHES[index % len(_CURVE_DASHES)], marker=_CURVE_MARKERS[index % len(_CURVE_MARKERS)],
                  markersize=4, alpha=0.85)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set(xlabel="step", ylabel=REWARD_METRIC, title=f"Reward of the best {top_k} trials")
    figure.suptitle(summary.study, fontsize="small")
    if axes.lines:
        axes.legend(fontsize="small")
    return figure


def fidelity_figure(checks: Sequence[Any]) -> Figure:
    """A staged sweep's fidelity check: each raced configuration's rung mean against its full-horizon race
    mean, one panel per rung below the full horizon (rookworld/sweep/staged/stage_report.py's Fidelity)."""
    figure = _new_figure(4.5 * max(1, len(checks)), 4.0)
    for index, check in enumerate(checks):
        axes = figure.add_subplot(1, max(1, len(checks)), index + 1)
        for config, rung_mean, race_mean in check.points:
            axes.scatter([rung_mean], [race_mean], color="tab:red" if config == "baseline" else "tab:blue")
            axes.annotate(config if config == "baseline" else f"trial {config}", (rung_mean, race_mean), fontsize=7)
        rho = "n/a" if math.isnan(check.rho) else f"{check.rho:+.2f}"
        axes.set_title(f"rung {check.rung}: Spearman rho {rho}")
        axes.set_xlabel(f"mean eval/score at step {check.rung} (search seeds)")
        axes.set_ylabel("full-horizon mean (race seeds)")
    return figure
