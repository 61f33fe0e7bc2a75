"""Summaries of a sweep, one model for both sources: the child runs of one MLflow parent run
(`summarise_children`), or every trial of an Optuna study joined with its latest MLflow run (`summarise_study`,
matched by the `rookworld.study` and `rookworld.trial` tags over every launch that ran it). Each trial is a
TrialRow (its fields say where each value comes from); a children summary's params are those that differ.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from rookworld.outcomes import OBJECTIVE_METRIC, OBJECTIVE_SE_METRIC, OBJECTIVE_START_METRIC, OUTCOMES, RUNNING, SUCCESS
from rookworld.specs.sweep import DIRECTIONS
from rookworld.stats.intervals import Estimate, evaluation_interval
from rookworld.sweep.staged.stages import BASELINE, CONFIG_ATTR, CONFIRM, RACE, SCORES_ATTR, STAGE_ATTR, Item
from rookworld.sweep.storage.study import FAIL_REASON_ATTR, OBJECTIVE_SE_ATTR, OUTCOME_ATTR, RETRY_OF_ATTR, STEP_ATTR
from rookworld.tracking import (OUTCOME_TAG, PARENT_TAG, ROLE_TAG, STEPS_METRIC, STOP_REASON_TAG,
                                STUDY_TAG, TRIAL_TAG)

if TYPE_CHECKING:
    import optuna
    from mlflow import MlflowClient
    from mlflow.entities import Run
    from optuna.trial import FrozenTrial

STAGE_TAG = "rookworld.stage"  # a staged sweep's run tag (trial.tags.stage)
OPTUNA_STATES = ("COMPLETE", "PRUNED", "FAIL", "RUNNING", "WAITING")
RUNS, STUDY = "runs", "study"  # a summary's source: an MLflow parent's child runs, or an Optuna study
NO_RUN = "-"  # the outcome of a study trial with neither an MLflow run nor an outcome recorded by its job
SKILL_COLUMNS = (  # (header, the run's metric): chess skill beside the objective, where the runs logged it
    ("best move", "eval/P/best_move"), ("win-prob loss", "eval/P/win_prob_loss"),
    ("mate in 1", "eval/P/mate_in_one"), ("A: next state", "eval/A/next_state"))
_NOT_SWEPT_PREFIXES = ("git.",)
_NOT_SWEPT = ("trial.number", "checkpoint.dir")  # checkpoint.dir: each job's own output dir


@dataclass(frozen=True)
class TrialRow:
    """One trial of a sweep; fields a source does not have stay None."""

    trial: int | None  # the trial number (None: a child run without the tag)
    outcome: str  # rookworld.outcome of its (latest) MLflow run, else the outcome its job recorded; NO_RUN if neither
    objective: float | None  # the run's `objective` metric (a pruned run's: its last evaluation's), or the value told
    # to Optuna (COMPLETE; PRUNED: its run's `objective`)
    params: dict[str, Any]  # the run's params (text), or the trial's swept params
    note: str = ""  # the run's stop reason, or why the trial failed and which trial it retries
    state: str | None = None  # Optuna state: COMPLETE, PRUNED, FAIL, RUNNING, WAITING
    last_step: int | None = None  # the steps its run trained (run/steps), else the step of its last pruner report
    run_id: str | None = None  # its MLflow run
    status: str | None = None  # its MLflow run's status
    start_time: int = 0  # its MLflow run's start (ms)
    interval: tuple[float, float] | None = None  # 95% interval of the objective (None: none recorded)
    interval_basis: str = ""  # what the interval covers: its seeds, or one seed's evaluation noise only
    stage: str | None = None  # a staged sweep's: search, race or confirm (a run: one seed of a configuration)
    config: str | None = None  # a staged sweep's configuration: the search trial that sampled it, or "baseline"
    start: float | None = None  # the objective at step 0, the untrained model on its problems (objective/start)
    skill: dict[str, float] = field(default_factory=dict)  # its run's final SKILL_COLUMNS metrics


@dataclass(frozen=True)
class SweepSummary:
    """The trials of one sweep, from one source; both sources are logged on the same parent run."""

    source: str  # RUNS or STUDY
    study: str
    direction: str
    trials: tuple[TrialRow, ...]
    params: tuple[str, ...]  # the param columns
    parent_run_id: str | None = None  # RUNS: the parent run of the children
    log_scale: tuple[str, ...] = ()  # params swept on a log scale: log axes in the plots

    @property
    def outcome_counts(self) -> dict[str, int]:
        """Trials per outcome, every known outcome included (0 when absent); NO_RUN left out."""
        return _counts((t.outcome for t in self.trials if t.outcome != NO_RUN), OUTCOMES)

    @property
    def state_counts(self) -> dict[str, int]:
        """STUDY: trials per Optuna state, every state included; RUNS: empty."""
        return _counts((t.state for t in self.trials), OPTUNA_STATES) if self.source == STUDY else {}

    def ranked(self) -> list[TrialRow]:
        """Trials that succeeded, with an objective, best first (a pruned, failed or guard-stopped trial, which
        is COMPLETE with the failure penalty in a study, is never best)."""
        scored = [t for t in self.trials if t.objective is not None and t.outcome in (SUCCESS, NO_RUN)
                  and not one_seed_of_a_stage(t, self.source)]
        return sorted(scored, key=lambda t: t.objective, reverse=self.direction == "maximize")

    @property
    def best(self) -> TrialRow | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None

    def baseline(self, stage: str | None) -> float | None:
        """A staged sweep's baseline configuration: the mean objective of its successful trials of `stage`
        (the same steps and held-out part as that stage's others); None without."""
        scores = [t.objective for t in self.trials if t.config == BASELINE and t.stage == stage
                  and t.objective is not None and t.outcome in (SUCCESS, NO_RUN)]
        return sum(scores) / len(scores) if scores else None


def _counts(values: Any, known: Sequence[str]) -> dict[str, int]:
    found = Counter(values)
    return {**{k: found.get(k, 0) for k in known}, **found}


def one_seed_of_a_stage(trial: TrialRow, source: str) -> bool:
    """A staged sweep's one-seed score, never ranked: a race or confirmation trial, or any child run of one
    (each is one seed of a configuration; the stage report compares configurations)."""
    return trial.stage is not None and (source == RUNS or trial.stage in (RACE, CONFIRM))


# ---------------------------------------------------------------- reading


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


def run_trial_number(run: Run) -> int | None:
    trial = run.data.tags.get(TRIAL_TAG)
    return int(trial) if trial is not None and trial.lstrip("-").isdigit() else None


def seeds_interval(trial: FrozenTrial) -> dict[str, Any]:
    """A staged trial's 95% t-interval over its seeds at the last rung every seed reached."""
    scores = trial.user_attrs.get(SCORES_ATTR, [])
    if not scores:
        return {}
    last = max(r for r, _, _ in scores)
    estimate = Estimate.of({seed: score for r, seed, score in scores if r == last})
    if math.isnan(estimate.low):
        return {}
    return {"interval": (estimate.low, estimate.high), "interval_basis": f"{estimate.seeds} seeds at step {last}"}


def start_score(run: Run) -> float | None:
    """objective.metric at step 0 of a run that evaluated at step 0 (the trainer logs it as objective/start)."""
    return run.data.metrics.get(OBJECTIVE_START_METRIC)


def skill_metrics(run: Run | None) -> dict[str, float]:
    """The SKILL_COLUMNS metrics of a run that succeeded: its final evaluation's (a pruned or failed run's
    latest values are those of an earlier evaluation, often the untrained model's at step 0)."""
    metrics = run.data.metrics if run is not None and run.data.tags.get(OUTCOME_TAG) == SUCCESS else {}
    return {metric: metrics[metric] for _, metric in SKILL_COLUMNS if metric in metrics}


def run_row(run: Run) -> TrialRow:
    tags, objective = run.data.tags, run.data.metrics.get(OBJECTIVE_METRIC)
    objective = None if objective is None or math.isnan(objective) else float(objective)
    return TrialRow(
        start=start_score(run),
        trial=run_trial_number(run),
        outcome=tags.get(OUTCOME_TAG, RUNNING),
        objective=objective,
        params=dict(run.data.params),
        note=tags.get(STOP_REASON_TAG, ""),
        run_id=run.info.run_id,
        status=run.info.status,
        start_time=run.info.start_time or 0,
        stage=tags.get(STAGE_TAG),
        skill=skill_metrics(run),
        **evaluation_interval(objective, run.data.metrics.get(OBJECTIVE_SE_METRIC)),
    )


def is_swept(key: str) -> bool:
    return key not in _NOT_SWEPT and not key.startswith(_NOT_SWEPT_PREFIXES)


def swept_params(trials: Sequence[TrialRow]) -> tuple[str, ...]:
    """Param keys whose value differs between trials (missing counts as a value)."""
    keys = sorted({k for t in trials for k in t.params})
    return tuple(k for k in keys if len({t.params.get(k) for t in trials}) > 1 and is_swept(k))


def summarise_children(
    client: MlflowClient, parent_run_id: str, direction: Any = "maximize", log_scale: Sequence[str] = ()
) -> SweepSummary:
    parent = client.get_run(parent_run_id)
    children = search_all_runs(client, parent.info.experiment_id, f"tags.{PARENT_TAG} = '{parent_run_id}'")
    trials = sorted((run_row(run) for run in children), key=lambda t: (t.trial is None, t.trial or 0, t.start_time))
    return SweepSummary(
        source=RUNS,
        study=parent.data.tags.get(STUDY_TAG, parent.info.run_name or parent_run_id),
        direction=normalise_direction(direction),
        trials=tuple(trials),
        params=swept_params(trials),
        parent_run_id=parent_run_id,
        log_scale=tuple(log_scale),
    )


def fetch_study_runs(client: MlflowClient, experiment_id: str, study: str) -> list[Run]:
    """All trial runs of a study in an experiment, across sweep invocations (parents)."""
    return search_all_runs(client, experiment_id, f"tags.`{STUDY_TAG}` = '{study}' and tags.`{ROLE_TAG}` = 'trial'")


def latest_runs(runs: Sequence[Run]) -> dict[int, Run]:
    """Trial number -> its latest run."""
    latest: dict[int, Run] = {}
    for run in runs:
        trial = run_trial_number(run)
        if trial is not None and (trial not in latest or run.info.start_time > latest[trial].info.start_time):
            latest[trial] = run
    return latest


def _trial_note(trial: FrozenTrial) -> str:
    notes = []
    item = Item.of(trial)
    if item is not None:  # a staged sweep's trial: which configuration, which stage and seeds
        whose = "baseline" if item.baseline else f"config of trial {item.config}"
        notes.append(f"{item.stage} ({item.split}), {whose}, seeds {list(item.seeds)}")
    if FAIL_REASON_ATTR in trial.user_attrs:
        notes.append(str(trial.user_attrs[FAIL_REASON_ATTR]))
    if RETRY_OF_ATTR in trial.user_attrs:
        notes.append(f"retry of trial {trial.user_attrs[RETRY_OF_ATTR]}")
    return "; ".join(notes)


def study_row(trial: FrozenTrial, outcome: str, run: Run | None = None) -> TrialRow:
    """`outcome`: its MLflow run's; without one (NO_RUN), the outcome its job recorded on the trial (if any);
    `run`: its latest MLflow run (its objective at step 0 and the chess-skill metrics), if any."""
    if outcome == NO_RUN:
        outcome = str(trial.user_attrs.get(OUTCOME_ATTR, NO_RUN))
    steps = trial.intermediate_values
    complete = trial.value if trial.state.name == "COMPLETE" else None
    interval = seeds_interval(trial) or evaluation_interval(complete, trial.user_attrs.get(OBJECTIVE_SE_ATTR))
    logged = run.data.metrics if run is not None else {}
    pruned = logged.get(OBJECTIVE_METRIC) if trial.state.name == "PRUNED" else None  # its last evaluation's
    objective = complete if complete is not None else pruned
    last_step = logged.get(STEPS_METRIC, trial.user_attrs.get(STEP_ATTR, max(steps) if steps else None))
    return TrialRow(
        trial=trial.number,
        outcome=outcome,
        objective=None if objective is None or math.isnan(objective) else float(objective),
        params={k: v for k, v in trial.params.items() if is_swept(k)},
        note=_trial_note(trial),
        state=trial.state.name,
        last_step=None if last_step is None else int(last_step),
        stage=trial.user_attrs.get(STAGE_ATTR),
        config=trial.user_attrs.get(CONFIG_ATTR),
        start=start_score(run) if run is not None else None,
        skill=skill_metrics(run),
        **(interval if complete is not None else {}),
    )


def summarise_study(study: optuna.Study, runs: Sequence[Run] | None = None) -> SweepSummary:
    """The study's trials (Optuna states and values) joined with their MLflow runs' outcomes."""
    latest = latest_runs(runs or [])
    trials = tuple(study_row(t, latest[t.number].data.tags.get(OUTCOME_TAG, RUNNING) if t.number in latest else NO_RUN,
                             latest.get(t.number)) for t in study.get_trials(deepcopy=False))
    return SweepSummary(source=STUDY, study=study.study_name, direction=normalise_direction(study.direction),
                        trials=trials, params=tuple(sorted({k for t in trials for k in t.params})))


# ---------------------------------------------------------------- text


def format_objective(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def format_value(value: Any) -> str:
    """A param for a table: a float, or an MLflow param's text that is a non-integer number, to 4 significant
    digits; None: "-"."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    try:
        number = float(text)
    except ValueError:
        return text
    return text if number.is_integer() and "e" not in text.lower() and "." not in text else f"{number:.4g}"


def _headline(summary: SweepSummary) -> str:
    counted = ", ".join(f"{o} {n}" for o, n in summary.outcome_counts.items() if n)
    if summary.source == RUNS:
        return f"{len(summary.trials)} trials ({counted or 'none'}); objective: {summary.direction}."
    states = ", ".join(f"{s} {n}" for s, n in summary.state_counts.items() if n)
    outcomes = ", ".join(f"{o} {n}" for o, n in sorted(summary.outcome_counts.items()) if n)
    return (f"{len(summary.trials)} trials; Optuna states: {states or 'none'}; "
            f"MLflow outcomes: {outcomes or 'no runs found'}; objective: {summary.direction}.")


def interval_text(trial: TrialRow) -> str:
    """The objective's 95% interval and what it covers, or that none was recorded."""
    if trial.interval is None:
        return "no interval recorded: one value, not evidence that it is best"
    low, high = trial.interval
    return f"95% CI {low:.4g}..{high:.4g}, {trial.interval_basis}"


def _best_line(summary: SweepSummary) -> str:
    """The highest objective, always with its interval (or the note that it has none)."""
    best, runs = summary.best, summary.source == RUNS
    if best is None and any(t.stage for t in summary.trials) and runs:
        return "Best: see the stages report (each run here is one seed of a configuration)."
    if best is None:
        return f"Best: none (no trial {'succeeded' if runs else 'finished successfully'})."
    keys = summary.params if runs else best.params
    chosen = ", ".join(f"{k}={format_value(best.params.get(k))}" for k in keys)
    if runs:
        return (f"Best: trial {best.trial} objective {format_objective(best.objective)} ({interval_text(best)})"
                f" ({chosen or 'no swept params'}), run {best.run_id}.")
    return (f"Best: trial {best.trial}{_configuration(best)}, objective {format_objective(best.objective)} "
            f"({interval_text(best)}) ({chosen or 'no params'}).")


def against_start_and_baseline(summary: SweepSummary) -> list[str]:
    """The best trial against the untrained model (its own objective at step 0, on the same problems) and
    against a staged sweep's baseline (its mean in the best trial's stage); one line for each it has,
    saying when the best is worse, or is the baseline itself."""
    best, lines = summary.best, []
    if best is None or best.objective is None:
        return lines
    sign = 1 if summary.direction == "maximize" else -1
    baseline = summary.baseline(best.stage)
    if baseline is not None and best.config == BASELINE:
        lines.append("The best is the baseline configuration itself: no searched configuration beat it.")
        baseline = None
    for name, reference in (("the untrained model (objective at step 0)", best.start),
                            ("the baseline configuration (its mean)", baseline)):
        if reference is None:
            continue
        change = best.objective - reference
        if sign * change < 0:
            lines.append(f"The best is WORSE than {name}: {format_objective(best.objective)} against "
                         f"{format_objective(reference)} ({change:+.4f}): no trial improved on it.")
        else:
            lines.append(f"Against {name}: {format_objective(reference)} -> {format_objective(best.objective)} "
                         f"({change:+.4f}).")
    return lines


def _configuration(best: TrialRow) -> str:
    """A staged search trial's configuration, as the stage report names it (a promoted rung is its own trial)."""
    if best.config is None or best.config == str(best.trial):
        return ""
    whose = "the baseline" if best.config == BASELINE else f"trial {best.config}"
    return f" (a search rung of {whose}; the stage report below compares configurations)"


def _columns(summary: SweepSummary) -> list[tuple[str, Any]]:
    """(header, cell of a row) for each table column of the summary's source."""
    params = [(k, lambda t, k=k: format_value(t.params.get(k))) for k in summary.params]
    trial = ("trial", lambda t: "-" if t.trial is None else str(t.trial))
    objective = ("objective", lambda t: format_objective(t.objective))
    outcome = ("outcome", lambda t: t.outcome)
    logged = {metric for t in summary.trials for metric in t.skill}
    skill = [(header, lambda t, m=metric: format_objective(t.skill.get(m)))
             for header, metric in SKILL_COLUMNS if metric in logged]
    if summary.source == RUNS:
        return [trial, outcome, objective, *skill, *params, ("run", lambda t: (t.run_id or "")[:8]),
                ("stop reason", lambda t: t.note)]
    return [trial, ("state", lambda t: t.state), objective, outcome,
            ("last step", lambda t: "-" if t.last_step is None else str(t.last_step)), *skill, *params, ("note", lambda t: t.note)]


def summary_markdown(summary: SweepSummary) -> str:
    heading = f"# Sweep {summary.study}" if summary.source == RUNS else f"# Optuna study {summary.study}"
    columns = _columns(summary)
    rows = [[cell(t) for _, cell in columns] for t in summary.trials]
    lines = [heading, "", _headline(summary), _best_line(summary), *against_start_and_baseline(summary), ""]
    return "\n".join(lines + markdown_table([header for header, _ in columns], rows)) + "\n"


def markdown_table(header: list[str], rows: list[list[str]], max_cell: int = 80) -> list[str]:
    """Lines of a markdown table; cells are cut to max_cell characters and may not contain '|'."""
    def cell(text: str) -> str:
        return str(text)[:max_cell].replace("|", "/")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]


def summary_dict(summary: SweepSummary) -> dict[str, Any]:
    best = summary.best
    return {
        "source": summary.source,
        "parent_run_id": summary.parent_run_id,
        "study": summary.study,
        "direction": summary.direction,
        "outcome_counts": summary.outcome_counts,
        "state_counts": summary.state_counts,
        "params": list(summary.params),
        "best": asdict(best) if best is not None else None,
        "trials": [asdict(t) for t in summary.trials],
    }
