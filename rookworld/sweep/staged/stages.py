"""The stages of a staged sweep as Optuna trials, and what each stage needs next (docs/sweeps.md, Stages).

Every piece of work is an Optuna trial whose user attrs (`rookworld:work.*`) say what it runs: a search
configuration (the baseline enqueued first) on the k search seeds, rung by rung; a race run (one configuration,
one added seed); a confirmation run (a finalist or the baseline, one fresh seed on the confirmation's pool).
`due()` derives the next runs from what the study records, and nothing else: every worker calls it under the
study's lock before it asks, and it enqueues only runs no trial holds yet, so a killed sweep, several workers
and several launches agree. Race, confirmation and baseline trials have no Optuna params (their configuration
is in `rookworld:work.overrides`): the sampler learns from the sampled search trials only.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from rookworld.stats.blocks import game_blocks
from rookworld.specs.sweep import CONFIRMATION_STAGE, Stages
from rookworld.stats.racing import RaceState, race
from rookworld.stats.verdict import Verdict, confirm
from rookworld.sweep.storage.study import CARRIED_PREFIX, OUTCOME_ATTR, is_stale_failure

WORK = CARRIED_PREFIX  # a re-queued trial carries these attrs (rookworld/sweep/storage/study.py)
STAGE_ATTR = WORK + "stage"
CONFIG_ATTR = WORK + "config"
OVERRIDES_ATTR = WORK + "overrides"
SEEDS_ATTR = WORK + "seeds"
POOL_ATTR = WORK + "pool"  # a confirmation run's held-out part (hydra.sweeper.stages.confirm.pool)
SCORES_ATTR = "rookworld:scores"  # [[rung, seed, score], ...]: each finished segment of the trial
PROBLEMS_ATTR = "rookworld:problems"  # {seed: [score per evaluated problem]} at the full horizon (its draw's order)
SECONDS_ATTR = "rookworld:seconds"  # wall seconds of the trial's runs (its GPU slot's time)
VERDICT_ATTR = "rookworld:verdict"  # study user attr: the verdict line, once the confirmation is in
RUNGS_ATTR = WORK + "rungs"  # {rung: [mean score, promoted]}: the halving's decisions on the trial (a retry carries them)
BASELINE = "baseline"
SEARCH, RACE, CONFIRM = "search", "race", CONFIRMATION_STAGE
SUCCESS = "success"
RUN_ATTEMPTS = 2  # a race or confirmation run that raised runs again once; raised twice, its configuration leaves the stage


@dataclass(frozen=True)
class Item:
    """What one trial runs: a configuration (`config`: the search trial number that sampled it, or
    "baseline") on some seeds, in a stage."""

    stage: str
    config: str
    overrides: tuple[str, ...]
    seeds: tuple[int, ...]
    pool: str | None = None  # a confirmation's: confirm.pool (a study from before the final pool: test)

    @property
    def baseline(self) -> bool:
        return self.config == BASELINE

    @property
    def split(self) -> str:
        """The held-out part that scores it: selection uses validation, the confirmation its pool."""
        return (self.pool or "test") if self.stage == CONFIRM else "validation"

    def attrs(self) -> dict[str, Any]:
        return {STAGE_ATTR: self.stage, CONFIG_ATTR: self.config, OVERRIDES_ATTR: list(self.overrides),
                SEEDS_ATTR: list(self.seeds), **({POOL_ATTR: self.pool} if self.pool else {})}

    @classmethod
    def of(cls, trial: Any) -> Item | None:
        """The item of a trial (frozen or live), None for a trial that is not one yet."""
        attrs = trial.user_attrs
        if STAGE_ATTR not in attrs:
            return None
        return cls(attrs[STAGE_ATTR], str(attrs[CONFIG_ATTR]), tuple(attrs[OVERRIDES_ATTR]), tuple(attrs[SEEDS_ATTR]),
                   attrs.get(POOL_ATTR))

    @property
    def key(self) -> tuple[str, str, tuple[int, ...]]:
        return self.stage, self.config, self.seeds


def segment_scores(trial: FrozenTrial, rung: int) -> dict[int, float]:
    """seed -> score of the trial's finished segments at `rung`."""
    return {int(seed): float(score) for r, seed, score in trial.user_attrs.get(SCORES_ATTR, []) if r == rung}


def is_search(trial: FrozenTrial) -> bool:
    """A search trial (every trial of an unstaged sweep is one)."""
    return trial.user_attrs.get(STAGE_ATTR, SEARCH) == SEARCH


@dataclass(frozen=True)
class StageView:
    """A staged study as its stages see it (the report reads the same view)."""

    settings: Stages
    trials: tuple[FrozenTrial, ...]  # stale failures left out
    n_trials: int
    cut: tuple[FrozenTrial, ...] = ()  # the stale failures: runs cut by the end of their machine (re-queued)

    @classmethod
    def of(cls, trials: Sequence[FrozenTrial], settings: Stages, n_trials: int) -> StageView:
        return cls(settings, tuple(t for t in trials if not is_stale_failure(t)), n_trials,
                   tuple(t for t in trials if is_stale_failure(t)))

    def items(self, stage: str) -> list[tuple[FrozenTrial, Item]]:
        pairs = [(t, Item.of(t)) for t in self.trials]
        return [(t, item) for t, item in pairs if item is not None and item.stage == stage]

    def search_complete(self) -> list[tuple[FrozenTrial, Item]]:
        return [(t, i) for t, i in self.items(SEARCH) if t.state == TrialState.COMPLETE]

    def search_started(self) -> bool:
        """Every search configuration has been sampled and started (the sampler has nothing more to give)."""
        return sum(1 for t in self.trials if is_search(t) and t.state != TrialState.WAITING) >= self.n_trials

    def search_done(self) -> bool:
        return self.search_started() and all(t.state.is_finished() for t in self.trials if is_search(t))

    def overrides(self) -> dict[str, tuple[str, ...]]:
        return {item.config: item.overrides for _, item in self.items(SEARCH)}

    def run_scores(self, stage: str, config: str) -> dict[int, float]:
        """seed -> full-horizon score of `config`'s one-seed runs of `stage` that completed (a run that raised is
        a failure, never a score: it runs again, RUN_ATTEMPTS in all)."""
        scores = {}
        for trial, item in self.items(stage):
            if item.config == config and trial.state == TrialState.COMPLETE:
                scores.update(segment_scores(trial, self.settings.horizon))
        return scores

    def crashes(self) -> dict[tuple[str, str, tuple[int, ...]], list[FrozenTrial]]:
        """Item key -> the race and confirmation runs of it that raised (stale ones aside: the study retries those)."""
        crashed: dict[tuple[str, str, tuple[int, ...]], list[FrozenTrial]] = {}
        for stage in (RACE, CONFIRM):
            for trial, item in self.items(stage):
                if trial.state == TrialState.FAIL:
                    crashed.setdefault(item.key, []).append(trial)
        return crashed

    def failed(self, stage: str) -> list[str]:
        """The configurations of `stage` with a run that raised RUN_ATTEMPTS times: out of that stage."""
        return sorted({config for (s, config, _), runs in self.crashes().items() if s == stage
                       and len(runs) >= RUN_ATTEMPTS})

    def ranked_search(self) -> list[tuple[FrozenTrial, Item]]:
        """The searched configurations (baseline aside) that ran to the full horizon and succeeded, best first."""
        done = [(t, i) for t, i in self.search_complete()
                if not i.baseline and t.user_attrs.get(OUTCOME_ATTR) == SUCCESS and t.value is not None]
        return sorted(done, key=lambda pair: -float(pair[0].value))

    def race_configs(self) -> list[str]:
        """The `race.top` best searched configurations and the baseline, less those whose race runs failed."""
        failed = self.failed(RACE)
        return [c for c in [item.config for _, item in self.ranked_search()[:self.settings.race.top]] + [BASELINE]
                if c not in failed]

    def race_scores(self) -> dict[str, dict[int, float]]:
        """config -> seed -> full-horizon score of each raced configuration: its search seeds, then its race runs."""
        search = {i.config: segment_scores(t, self.settings.horizon) for t, i in self.search_complete()}
        return {c: {**search.get(c, {}), **self.run_scores(RACE, c)} for c in self.race_configs()}

    def race_state(self) -> RaceState:
        s = self.settings
        return race(self.race_configs(), self.race_scores(), s.race_seeds(), alpha=s.race.alpha,
                    min_seeds=s.race.min_seeds, test=s.race.test)

    def finalists(self, state: RaceState) -> list[str]:
        """The race's best survivors, less those whose confirmation runs failed (the next survivor takes the place)."""
        failed = self.failed(CONFIRM)
        return [c for c in state.survivors if c != BASELINE and c not in failed][:self.settings.confirm.finalists]

    def verdict(self, finalists: list[str]) -> Verdict | None:
        """The confirmation's verdict once every finalist and the baseline have every fresh seed."""
        seeds = set(self.settings.confirm_seeds())
        scores = {c: self.run_scores(CONFIRM, c) for c in [*finalists, BASELINE]}
        if any(set(s) != seeds for s in scores.values()):
            return None
        c = self.settings.confirm
        return confirm({int(f): scores[f] for f in finalists}, scores[BASELINE], alpha=c.alpha, test=c.test)


def halving_pool(trials: Sequence[FrozenTrial], rung: int) -> dict[str, float]:
    """config -> its mean at `rung` as decided: one value per configuration, whichever of its trials (a killed
    one or its retry, which carries the decision) recorded it."""
    pool = {}
    for trial in trials:
        item = Item.of(trial)
        decided = trial.user_attrs.get(RUNGS_ATTR, {}).get(str(rung))
        if item is not None and item.stage == SEARCH and decided is not None:
            pool[item.config] = float(decided[0])
    return pool


def promoted(score: float, others: Sequence[float], eta: int) -> bool:
    """Asynchronous successive halving (Optuna's SuccessiveHalvingPruner's rule): in the top 1/eta of the rung's
    values so far, itself among them (the first eta - 1 values go on if they are the best so far)."""
    values = sorted([*others, score], reverse=True)
    return score >= values[max(len(values) // eta, 1) - 1]


def halving_report(trial: Any, eta: int) -> Callable[[int, float], bool]:
    """A search trial's rung report (rookworld/sweep/staged/rungs.py): True when the halving stops it at this rung.

    A rung is decided once: the decision and the value go to the trial in one write (RUNGS_ATTR), which a retry
    of a killed trial carries, so the retry goes on (or stops) where the original was told to, whatever the other
    configurations reported meanwhile; the pool holds one value per configuration, so a killed trial and its
    retry count once. `trial`: the live Optuna trial."""
    def report(rung: int, score: float) -> bool:
        trial.report(score, rung)
        decided = dict(trial.user_attrs.get(RUNGS_ATTR, {}))
        if str(rung) not in decided:
            item = Item.of(trial)
            assert item is not None
            pool = halving_pool(trial.study.get_trials(deepcopy=False), rung)
            pool.pop(item.config, None)
            decided[str(rung)] = [score, promoted(score, list(pool.values()), eta)]
            trial.set_user_attr(RUNGS_ATTR, decided)
        return not decided[str(rung)][1]

    return report


def undecided_line(stage: str) -> str:
    return (f"verdict: undecided: a {stage} run of the baseline raised {RUN_ATTEMPTS} times (infrastructure, not a "
            f"score: the report's failures line; fix it and run the same command)")


def no_finalist_line(view: StageView, state: RaceState) -> str:
    """The verdict when no finalist is left: undecided when a configuration left a stage because its runs raised
    (its score is unknown, not bad), else the race's negative answer."""
    lost = [(stage, config) for stage in (RACE, CONFIRM) for config in view.failed(stage) if config != BASELINE]
    if lost:
        stage, config = lost[0]
        return (f"verdict: undecided: a {stage} run of trial {config} raised {RUN_ATTEMPTS} times and no other "
                f"{'configuration' if stage == RACE else 'race survivor'} is left to confirm (infrastructure, not a "
                f"score: the report's failures line; fix it and run the same command)")
    return (f"verdict: no configuration beats the baseline (the race dropped every configuration against it, "
            f"{state.rounds} seeds)")


def due(view: StageView) -> tuple[list[Item], str | None]:
    """(runs to enqueue that no trial holds yet, the verdict line once the confirmation is in)."""
    s = view.settings
    crashed = view.crashes()
    held = {item.key for t, item in ((t, Item.of(t)) for t in view.trials) if item is not None
            and (t.state != TrialState.FAIL or item.key not in crashed or len(crashed[item.key]) >= RUN_ATTEMPTS)}
    for stage in (RACE, CONFIRM):
        if BASELINE in view.failed(stage):
            return [], undecided_line(stage)

    def new(items: list[Item]) -> list[Item]:
        return [item for item in items if item.key not in held]

    baseline = Item(SEARCH, BASELINE, s.baseline, s.search_seeds())
    if baseline.key not in held:
        return [baseline], None
    if not view.search_done():
        return (filler(view, new(baseline_runs(s))) if s.baseline_ahead and view.search_started() else []), None
    overrides = view.overrides()
    state = view.race_state()
    if not state.finished:
        ahead = s.race_seeds()[state.rounds + 1:state.rounds + 1 + s.race.ahead]
        needed = new([Item(RACE, config, overrides[config], (seed,)) for config, seed in state.pending])
        later = new([Item(RACE, config, overrides[config], (seed,)) for seed in ahead for config in state.survivors])
        return (needed or filler(view, later)), None
    finalists = view.finalists(state)
    if not finalists:
        return [], no_finalist_line(view, state)
    missing = new([Item(CONFIRM, config, overrides[config], (seed,), s.confirm.pool) for config in [*finalists, BASELINE]
                   for seed in s.confirm_seeds()])
    if missing:
        return missing, None
    verdict = view.verdict(finalists)
    return [], verdict.line() if verdict is not None else None


def filler(view: StageView, items: list[Item]) -> list[Item]:
    """Runs that no stage needs yet (the baseline's ahead, later race rounds), one per idle worker's call and only
    while nothing waits: a re-queued retry or a needed run starts before them."""
    waiting = any(t.state == TrialState.WAITING for t in view.trials)
    return [] if waiting else items[:1]


def baseline_runs(s: Stages) -> list[Item]:
    """The baseline's race runs (beyond its search seeds) and confirmation runs: what the race and the
    confirmation would ask of it, known before the search ends."""
    race = [Item(RACE, BASELINE, s.baseline, (seed,)) for seed in s.race_seeds() if seed not in s.search_seeds()]
    return [*race, *(Item(CONFIRM, BASELINE, s.baseline, (seed,), s.confirm.pool) for seed in s.confirm_seeds())]


def confirmation_blocks(trials: Iterable[Any], finalist: str, part_games: Sequence[Hashable | None],
                        num_policy: int) -> list[tuple[list[float], list]]:
    """Per fresh seed of a staged sweep's confirmation (its Optuna trials): the finalist's minus the baseline's
    per-position P: scores on the seed's block (eval.draw=blocks, eval.num_policy = `num_policy`), and each
    position's game; `part_games`: the game index of each P: problem of the confirmation's pool, in file order."""
    scores = {}
    for trial in trials:
        item = Item.of(trial)
        if item is not None and item.stage == CONFIRM and trial.state == TrialState.COMPLETE:
            for seed, values in trial.user_attrs.get(PROBLEMS_ATTR, {}).items():
                scores[item.config, int(seed)] = values
    blocks = game_blocks(part_games, num_policy)
    paired = []
    for (config, seed), values in sorted(scores.items()):
        if config == finalist and (BASELINE, seed) in scores:
            baseline = scores[BASELINE, seed]
            games = [part_games[i] for i in blocks[seed % len(blocks)]]
            paired.append(([a - b for a, b in zip(values[:num_policy], baseline[:num_policy])], games))
    return paired
