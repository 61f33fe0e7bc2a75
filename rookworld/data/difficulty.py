"""How hard each training problem is for the policy: its pass rate, the share of a group's completions
that solve it exactly (rookworld.tasks.solves: P: the engine's best move, A: the exact next state,
reward and flags). Two uses of a list of training problems, both off by default (conf/difficulty/):

  filter      a problem whose estimated pass rate is <= difficulty.low (no completion solves it) or
              >= difficulty.high (every one does) gives GRPO little to learn from; it is trained with
              probability difficulty.out_of_band_weight (0: dropped, 1: no filter). The coin is seeded
              by (seed, problem, epoch), so a resumed run decides alike. A problem never estimated is kept.
  curriculum  easy_first: every epoch visits the problems by their starting pass rate, highest first
              (ties, and the problems without one at the end, in the epoch's seeded shuffle).

The starting estimates come from difficulty.pass_rates, a JSONL file of {"prompt", "pass_rate"} rows
(`python -m rookworld.commands.pass_rates` measures them with the starting policy); every group GRPO samples
replaces its problem's estimate with that group's pass rate (the current policy's), so the filter follows
training. DAPO's dynamic sampling (grpo.dynamic_sampling) is the per-batch version of the filter.
"""
from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path

from rookworld.tasks import Problem

CURRICULA = ("none", "easy_first")


def read_pass_rates(path: str | Path) -> dict[str, float]:
    """{prompt text: pass rate} of a pass-rate file; a malformed row is a ValueError naming its line."""
    rates: dict[str, float] = {}
    with open(path) as lines:
        for number, line in enumerate(lines, 1):
            try:
                row = json.loads(line)
                rate = float(row["pass_rate"])
                prompt = str(row["prompt"])
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not a pass-rate row ({error})") from None
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{path}:{number}: pass_rate={rate!r} must be in [0, 1]")
            rates[prompt] = rate
    return rates


def write_pass_rates(path: str | Path, rates: Mapping[str, float]) -> None:
    Path(path).write_text("".join(json.dumps({"prompt": prompt, "pass_rate": rate}) + "\n"
                                  for prompt, rate in rates.items()))


def pass_rates_of(problems: list[Problem], solved: list[bool], group_size: int) -> dict[str, float]:
    """{prompt: pass rate} of consecutive groups of `group_size` rows, one problem per group."""
    rates = {}
    for start in range(0, len(problems), group_size):
        group = solved[start:start + group_size]
        rates[problems[start].prompt_text] = sum(group) / len(group)
    return rates


class DifficultyState:
    """Pass-rate estimates of training problems, the filter's decisions and the curriculum's order."""

    def __init__(self, low: float, high: float, out_of_band_weight: float, curriculum: str,
                 starting: Mapping[str, float] | None = None, seed: int = 0) -> None:
        self.low, self.high, self.out_of_band_weight = low, high, out_of_band_weight
        self.curriculum, self.seed = curriculum, seed
        self.starting = dict(starting or {})
        self.estimates = dict(self.starting)

    def record(self, problems: list[Problem], solved: list[bool], group_size: int) -> None:
        """Each group of `group_size` consecutive rows (one problem each) sets its problem's estimate."""
        self.estimates.update(pass_rates_of(problems, solved, group_size))

    def in_band(self, problem: Problem) -> bool:
        rate = self.estimates.get(problem.prompt_text)
        return rate is None or self.low < rate < self.high

    def keeps(self, problem: Problem, epoch: int) -> bool:
        """Whether `problem`, drawn in `epoch`, is trained (the filter)."""
        if self.in_band(problem) or self.out_of_band_weight >= 1.0:
            return True
        coin = random.Random(f"{self.seed}:keep:{epoch}:{problem.prompt_text}").random()
        return coin < self.out_of_band_weight

    def order(self, problems: list[Problem], shuffled: list[int]) -> list[int]:
        """The curriculum's visiting order of `problems`, given the epoch's seeded shuffle of their indices."""
        if self.curriculum == "none":
            return shuffled
        rate = [self.starting.get(problems[i].prompt_text, -1.0) for i in shuffled]  # unknown: last
        return [i for _, i in sorted(zip(rate, shuffled), key=lambda pair: -pair[0])]

    def state_dict(self) -> dict:
        return {"estimates": dict(self.estimates)}

    def load_state_dict(self, state: Mapping) -> None:
        self.estimates = dict(state["estimates"])
