"""Racing: configurations earn more paired seeds by not being shown worse than the incumbent.

The intensification of SMAC and the racing of irace, as a pure function of the recorded scores. The
race's seeds are taken in order; round r is complete once every configuration still in the race has
a score on seed r. Then, from `min_seeds` rounds on, the incumbent is the survivor with the best mean
over the race's first r seeds, and each other survivor is tested against it (one-sided paired test on
those r seeds): p <= alpha drops it. The race ends when one survivor is left or every seed is done.

Decisions depend on the recorded scores only, never on when they arrived: a killed sweep resumes by
calling `race` again with what its storage holds, and a score a worker recorded ahead of its round,
or for a configuration already dropped, changes nothing.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
import statistics

from rookworld.stats.paired import Scores, check_test, one_sided_p, paired_differences


@dataclass(frozen=True)
class Drop:
    """A configuration shown worse than the incumbent."""
    config: Hashable
    after_seeds: int  # the round at which it was dropped
    incumbent: Hashable
    p_value: float


@dataclass(frozen=True)
class RaceState:
    rounds: int  # complete rounds: every survivor has the race's first `rounds` seeds
    survivors: tuple  # best mean first (over the first `rounds` seeds; the race's order breaks ties)
    dropped: tuple[Drop, ...]  # in the order they were dropped
    pending: tuple[tuple[Hashable, int], ...]  # (configuration, seed) runs the next round needs
    finished: bool

    @property
    def incumbent(self) -> Hashable:
        return self.survivors[0]


def race(configs: Sequence[Hashable], scores: Mapping[Hashable, Scores], seeds: Sequence[int], *,
         alpha: float, min_seeds: int, test: str) -> RaceState:
    """Replay the race on the recorded scores: who is left, who was dropped when, what runs next.

    `configs`: the raced configurations (the baseline among them if it races); `scores`: per
    configuration, seed -> score (higher is better); `seeds`: the race's seeds in order, as many as
    its maximum."""
    _check_race(configs, seeds, alpha, min_seeds, test)
    survivors, dropped, rounds = list(configs), [], 0
    for seed in seeds:
        if len(survivors) == 1:
            break
        missing = tuple((config, seed) for config in survivors if seed not in scores.get(config, {}))
        if missing:
            return RaceState(rounds, _ranked(survivors, scores, seeds[:rounds]), tuple(dropped), missing,
                             finished=False)
        rounds += 1
        survivors = _ranked(survivors, scores, seeds[:rounds])
        if rounds >= min_seeds:
            worse = _worse_than_incumbent(survivors, scores, seeds[:rounds], alpha, test)
            dropped += worse
            gone = {drop.config for drop in worse}
            survivors = [config for config in survivors if config not in gone]
    return RaceState(rounds, tuple(survivors), tuple(dropped), (), finished=True)


def _ranked(configs: list, scores: Mapping[Hashable, Scores], seeds: Sequence[int]) -> tuple:
    """Best mean over `seeds` first; equal means keep their earlier order (a stable sort)."""
    if not seeds:
        return tuple(configs)
    return tuple(sorted(configs, key=lambda config: -statistics.fmean(scores[config][s] for s in seeds)))


def _worse_than_incumbent(ranked: tuple, scores: Mapping[Hashable, Scores], seeds: Sequence[int],
                          alpha: float, test: str) -> list[Drop]:
    incumbent, drops = ranked[0], []
    on_seeds = {config: {seed: scores[config][seed] for seed in seeds} for config in ranked}
    for config in ranked[1:]:
        p_value = one_sided_p(paired_differences(on_seeds[incumbent], on_seeds[config]), test)
        if p_value <= alpha:
            drops.append(Drop(config, len(seeds), incumbent, p_value))
    return drops


def _check_race(configs: Sequence[Hashable], seeds: Sequence[int], alpha: float, min_seeds: int, test: str) -> None:
    check_test(test)
    if not configs or len(set(configs)) != len(configs):
        raise ValueError(f"a race needs distinct configurations, got {list(configs)}")
    if len(seeds) < min_seeds:
        raise ValueError(f"the race has {len(seeds)} seeds, fewer than min_seeds={min_seeds}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"the race's seeds repeat: {list(seeds)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if min_seeds < 2:
        raise ValueError(f"min_seeds must be at least 2, got {min_seeds}")
