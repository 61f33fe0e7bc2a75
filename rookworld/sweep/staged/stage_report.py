"""The report of a staged sweep: its verdict first, then what each stage found, with its uncertainty.

Printed at the end of the sweep and logged on its MLflow parent run (`sweep_summary/stages.md`, `fidelity.png`);
docs/sweeps.md (Reading the report and the verdict) walks through it. A configuration is never called best, nor
a rung faithful, without its 95% interval.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState

from rookworld.specs.sweep import Stages
from rookworld.stats.intervals import Estimate, rho_text, spearman
from rookworld.stats.racing import RaceState
from rookworld.stats.verdict import Verdict
from rookworld.sweep.staged.stages import (BASELINE, CONFIG_ATTR, CONFIRM, SECONDS_ATTR, SEEDS_ATTR, STAGE_ATTR, VERDICT_ATTR,
                                    StageView, segment_scores)
from rookworld.stats.throughput import slot_occupancy
from rookworld.sweep.storage.study import FAIL_REASON_ATTR, GPU_ATTR, is_stale_failure


def name(config: str) -> str:
    return BASELINE if config == BASELINE else f"trial {config}"


@dataclass(frozen=True)
class Fidelity:
    rung: int
    rho: float  # nan with fewer than 3 configurations
    points: tuple[tuple[str, float, float], ...]  # (config, rung mean, full-horizon race mean)


def search_section(view: StageView) -> tuple[list[str], dict[str, dict[int, dict[int, float]]]]:
    """The search's lines and each configuration's scores per rung (config -> rung -> seed -> score)."""
    s = view.settings
    assert s.rungs is not None
    per_config, lines = {}, []
    rows = []
    for trial, item in view.items("search"):
        if not trial.state.is_finished():
            continue
        by_rung = {r: segment_scores(trial, r) for r in s.rungs}
        by_rung = {r: v for r, v in by_rung.items() if len(v) == len(item.seeds)}
        if not by_rung:
            continue
        per_config[item.config] = by_rung
        last = max(by_rung)
        rows.append((last, Estimate.of(by_rung[last]), item.config, trial.state.name.lower()))
    rows.sort(key=lambda row: (-row[0], -row[1].mean))
    lines.append(f"### Search: {len(rows)} configurations on seeds {list(s.search_seeds())} (validation), "
                 f"rungs {list(s.rungs)}, eta {s.eta}")
    lines.append("")
    lines.append("| configuration | last rung | mean over its seeds there | state |")
    lines.append("|---|---|---|---|")
    for rung, estimate, config, state in rows:
        lines.append(f"| {name(config)} | {rung} | {estimate.text()} | {state} |")
    full = [(e, c) for r, e, c, _ in rows if r == s.horizon and not math.isnan(e.low)]
    if full:
        best = max(full, key=lambda pair: pair[0].mean)
        close = [name(c) for e, c in full if e.high >= best[0].low and c != best[1]]
        lines.append("")
        lines.append(f"Highest search mean at the full horizon: {name(best[1])}, {best[0].text()}. Intervals "
                     f"overlapping it (not told apart on the search seeds): {', '.join(close) or 'none'}.")
    lines += search_fidelity(per_config, s.rungs)
    return lines, per_config


def search_fidelity(per_config: dict[str, dict[int, dict[int, float]]], rungs: tuple[int, ...]) -> list[str]:
    """Per rung below the full horizon: Spearman's rho of the rung means and the full-horizon means on the
    search's own seeds, over the configurations that reached the full horizon (more of them than the race
    has; all of them survivors of the halving, so the rho of a narrower range)."""
    horizon = rungs[-1]
    reached = [by_rung for by_rung in per_config.values() if horizon in by_rung]
    if not reached:
        return []
    n = len(reached)
    return [f"Fidelity on the search seeds: Spearman's rho between the rung-{rung} means and the {horizon}-step "
            f"means over the {len(reached)} configurations that reached {horizon} steps: "
            f"{rho_text(spearman([mean_at(r, rung) for r in reached], [mean_at(r, horizon) for r in reached]), n)}."
            for rung in rungs[:-1]]


def mean_at(by_rung: dict[int, dict[int, float]], rung: int) -> float:
    return statistics.fmean(by_rung[rung].values())


def race_section(view: StageView, state: RaceState) -> list[str]:
    s = view.settings
    raced = view.race_scores()
    lines = [f"### Race: {len(view.race_configs()) - 1} configurations and the baseline at {s.horizon} steps, "
             f"up to {s.race.max_seeds} seeds, drop at one-sided {s.race.test} p <= {s.race.alpha} against the "
             f"incumbent from {s.race.min_seeds} seeds", "",
             "| configuration | mean over its race seeds | status |", "|---|---|---|"]
    dropped = {d.config: d for d in state.dropped}
    for config in [*state.survivors, *dropped]:
        scores = {seed: raced[config][seed] for seed in s.race_seeds() if seed in raced[config]}
        if config in dropped:
            d = dropped[config]
            status = f"dropped after {d.after_seeds} seeds (worse than {name(str(d.incumbent))}, p = {d.p_value:.3f})"
        else:
            status = "survivor"
        lines.append(f"| {name(config)} | {Estimate.of(scores).text()} | {status} |")
    lines += ["", f"Survivors after {state.rounds} seeds (the race could not tell them apart from the best): "
              f"{', '.join(name(c) for c in state.survivors)}."]
    return lines


def fidelity(view: StageView, state: RaceState, per_config: dict[str, dict[int, dict[int, float]]]) -> list[Fidelity]:
    """Per rung below the full horizon: Spearman's rho of the rung means and the race means, over the raced
    configurations that reached that rung."""
    s = view.settings
    assert s.rungs is not None
    race_means = {c: statistics.fmean(scores.values()) for c, scores in view.race_scores().items() if scores}
    result = []
    for rung in s.rungs[:-1]:
        points = tuple((c, mean_at(per_config[c], rung), m) for c, m in race_means.items()
                       if rung in per_config.get(c, {}))
        result.append(Fidelity(rung, spearman([p[1] for p in points], [p[2] for p in points]), points))
    return result


def seconds_section(view: StageView, per_gpu: int) -> list[str]:
    """GPU-seconds: each run's wall seconds over the workers sharing a GPU."""
    by_stage: dict[str, list[float]] = {}
    for trial in view.trials:
        if trial.state in (TrialState.WAITING, TrialState.RUNNING):
            continue
        stage = trial.user_attrs.get(STAGE_ATTR, "search")
        by_stage.setdefault(stage, []).append(float(trial.user_attrs.get(SECONDS_ATTR, 0.0)) / per_gpu)
    total = sum(sum(v) for v in by_stage.values())
    parts = [f"{stage} {len(v)} trials, {statistics.fmean(v):.1f} s each" for stage, v in by_stage.items() if v]
    return [f"GPU-seconds (wall seconds / trial.trials_per_gpu = {per_gpu}): " + "; ".join(parts)
            + f"; total {total:.0f} s ({total / 3600:.2f} GPU-hours) to the verdict.", "", slots_line(view, per_gpu)]


def slots_line(view: StageView, per_gpu: int) -> str:
    """The slot occupancy: trials at once on each GPU over the time it ran any (from the trials' start and end
    times and the GPU their worker named), and those busy GPU-seconds. A run cut by the end of its machine has no
    end: it is left out."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for trial in view.trials:
        if trial.state.is_finished() and not is_stale_failure(trial) and GPU_ATTR in trial.user_attrs \
                and trial.datetime_start is not None and trial.datetime_complete is not None:
            spans.setdefault(trial.user_attrs[GPU_ATTR], []).append(
                (trial.datetime_start.timestamp(), trial.datetime_complete.timestamp()))
    occupancy = slot_occupancy(spans)
    if occupancy is None:
        return "Slots: no finished trial names its GPU."
    return (f"Slots: trials at once on a GPU while it ran any, mean {occupancy.mean:.2f}, max {occupancy.max} "
            f"(trial.trials_per_gpu = {per_gpu}), over {occupancy.gpus} GPU{'s' * (occupancy.gpus != 1)}; busy "
            f"GPU-seconds {occupancy.busy_s:.0f} ({occupancy.busy_s / 3600:.2f} GPU-hours), "
            f"{sum(len(v) for v in spans.values())} trials.")


def stage_report(view: StageView, verdict: str | None, per_gpu: int,
                 differences: Mapping[str, tuple] | None, compared: str | None) -> tuple[str, list[Fidelity]]:
    """The report's markdown, and the fidelity figures (for the plot)."""
    lines = ["## Stages", "", verdict or "verdict: not reached yet (the same command goes on)", "",
             pool_line(view.settings.confirm.pool)]
    if differences is not None and compared is not None:
        lines += ["", f"{name(compared)} against the baseline, the keys that differ:"]
        lines += [f"- `{key}`: {old!r} (baseline) -> {new!r}" for key, (old, new) in differences.items()] or ["- none"]
    lines += ["", failures_line(view), ""]
    search_lines, per_config = search_section(view)
    lines += search_lines
    checks: list[Fidelity] = []
    if view.search_done():
        state = view.race_state()
        lines += ["", *race_section(view, state)]
        checks = fidelity(view, state, per_config)
        for check in checks:
            lines.append(f"Fidelity: Spearman's rho between the rung-{check.rung} means and the full-horizon race "
                         f"means over the raced configurations: {rho_text(check.rho, len(check.points))}.")
        finalists = view.finalists(state) if state.finished else []
        if finalists:
            s = view.settings
            lines += ["", f"### Confirmation on fresh seeds {list(s.confirm_seeds())}, the {s.confirm.pool} pool", "",
                      "| configuration | mean over the fresh seeds |", "|---|---|"]
            for config in [*finalists, BASELINE]:
                scores = view.run_scores(CONFIRM, config)
                if scores:
                    lines.append(f"| {name(config)} | {Estimate.of(scores).text()} |")
            confirmed = view.verdict(finalists)
            if confirmed is not None:
                lines += ["", *paired_lines(confirmed, s.confirm.test)]
    lines += ["", *seconds_section(view, per_gpu)]
    return "\n".join(lines), checks


def pool_line(pool: str) -> str:
    """Which held-out part the confirmation scores, and what else has read it."""
    if pool == "final":
        return ("Confirmation pool: final (data.policy_final, data.arbiter_final): read by this confirmation alone, "
                "never by a selection.")
    return ("Confirmation pool: test (data.policy_test, data.arbiter_test): fresh to this sweep, but earlier choices "
            "(warm starts, recipes) were scored on it.")


def paired_lines(verdict: Verdict, test: str) -> list[str]:
    """Each finalist against the baseline on the fresh seeds: the verdict's evidence, and the raw p."""
    return [f"{name(str(f.trial))} minus the baseline, paired: {f.evidence(test)}; unadjusted p = "
            f"{f.comparison.p_value:.3f}" for f in verdict.finalists]


def failures_line(view: StageView) -> str:
    """Infrastructure failures, on a line of their own: runs cut by the end of their machine (re-queued, their
    finished segments kept) and runs that raised (never a score: run again, then their configuration leaves)."""
    raised = [t for t in view.trials if t.state == TrialState.FAIL]
    parts = [f"{len(view.cut)} runs cut by the end of their machine (re-queued)", f"{len(raised)} runs that raised"]
    details = [f"trial {t.number} ({t.user_attrs.get(STAGE_ATTR, 'search')}, "
               f"{name(str(t.user_attrs.get(CONFIG_ATTR, t.number)))}, seeds {t.user_attrs.get(SEEDS_ATTR)}): "
               f"{str(t.user_attrs.get(FAIL_REASON_ATTR, 'no reason recorded'))[:200]}" for t in raised]
    return "Infrastructure failures: " + ", ".join(parts) + (": " + "; ".join(details) if details else "") + "."


def compared_config(view: StageView) -> str | None:
    """The configuration the report sets against the baseline: the verdict's winner, else the confirmed
    finalist with the largest mean difference, else (before the confirmation) the race's best survivor
    that is not the baseline."""
    if not view.search_done():
        return None
    finalists = view.finalists(view.race_state())
    verdict = view.verdict(finalists) if finalists else None
    if verdict is not None:
        return str((verdict.winner or verdict.finalists[0]).trial)
    return finalists[0] if finalists else None


def study_stage_report(study: optuna.Study, stages: Stages, n_trials: int, config: DictConfig,
                       differences_of: Callable[[tuple, tuple], Mapping[str, tuple]] | None = None
                       ) -> tuple[str, list[Fidelity]]:
    """The report of a staged study as far as it has got (`config`: the sweep's composed config, for the failure
    penalty and the workers per GPU). `differences_of(baseline overrides, compared overrides)`: the config keys
    that differ (None: the report leaves them out)."""
    view = StageView.of(study.get_trials(deepcopy=False), stages, n_trials)
    compared = compared_config(view)
    differences = None
    if differences_of is not None and compared is not None:
        overrides = view.overrides()
        differences = differences_of(overrides[BASELINE], overrides[compared])
    per_gpu = int(OmegaConf.select(config, "trial.trials_per_gpu"))
    return stage_report(view, study.user_attrs.get(VERDICT_ATTR), per_gpu, differences, compared)
