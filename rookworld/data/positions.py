"""Loaders of P: and A: problems, and the seeded task-mix sampler the training loop draws from.

Sources (the `source` argument of the loaders):
  None                  the bundled files in rookworld/data/bundled/ (README.md there)
  a path                a JSONL(.gz) file: annotated positions (P:) or A: cases (A: held-out parts); the
                        A: training stream over a path: arbiter_training_stream
  a mapping / DictConfig  a `data` config (conf/data/*.yaml): `kind: bundled` with optional paths, or
                        `kind: rookworld7m` (the published dataset, rookworld/data/rookworld7m.py)

A: training problems are an endless seeded stream built from the training positions in configured
case shares (rookworld/data/arbiter_stream.py). Ground truth always comes from python-chess
(rookworld.tasks.arbiter_truth), never from a stored label.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import chess

from rookworld.data.arbiter_stream import ArbiterStream
from rookworld.data.difficulty import DifficultyState
from rookworld.data.records import FINAL, HELD_OUT_SPLITS, at_line, check_split, iter_jsonl
from rookworld.data.rookworld7m import load_rookworld7m_config
from rookworld.tasks import (
    Candidate,
    PolicyTruth,
    Problem,
    arbiter_problem,
    arbiter_truth,
    history_with_move,
    policy_problem,
)

BUNDLED_DIR = Path(__file__).parent / "bundled"
BUNDLED = {
    "policy_train": BUNDLED_DIR / "train.jsonl.gz",
    "policy_validation": BUNDLED_DIR / "validation.jsonl.gz",
    "policy_test": BUNDLED_DIR / "test.jsonl.gz",
    "arbiter_validation": BUNDLED_DIR / "validation_arbiter.jsonl.gz",
    "arbiter_test": BUNDLED_DIR / "test_arbiter.jsonl.gz",
}
DATA_KINDS = ("bundled", "rookworld7m")  # data.kind
HELDOUT_SOURCES = ("bundled", "hub")  # data.heldout of kind rookworld7m

Source = str | Path | Mapping | None


# -- P: --------------------------------------------------------------------------------------------


def policy_truth_from_record(record: dict) -> PolicyTruth:
    """The truth of an annotated position: its MultiPV candidates and, when the record has them, the
    action values of every legal move (`"action_values": [["e2e4", 0.31], ...]`, docs/rewards.md)."""
    candidates = tuple(Candidate(c["move"], float(c["eval"])) for c in record["candidates"])
    values = record.get("action_values")
    if values is not None:
        values = _action_values(values)
    return PolicyTruth(fen=record["fen"], candidates=candidates, action_values=values)


def _action_values(pairs: list) -> tuple[Candidate, ...]:
    """The [move, value] pairs as Candidates; the first malformed pair a ValueError. (One pass of type
    checks, then the Candidates: a RL split holds millions of pairs.)"""
    bad = [pair for pair in pairs if not (type(pair) is list and len(pair) == 2 and type(pair[0]) is str
                                          and type(pair[1]) in (int, float))]  # bool is not a value
    if bad:
        raise ValueError(f"action_values entry {bad[0]!r}: expected [\"<uci move>\", <value in pawns>]")
    return tuple(Candidate(move, float(value)) for move, value in pairs)


def load_policy_problems(split: str, source: Source = None) -> list[Problem]:
    """P: problems of `split` ("train" | "validation" | "test" | "final"), in file order."""
    check_split(split)
    if isinstance(source, Mapping):
        return _policy_from_config(split, source)
    path = Path(source) if source is not None else _bundled(f"policy_{split}")
    return list(_policy_problems_cached(*_file_key(path)))


@lru_cache(maxsize=8)
def _policy_problems_cached(path: str, mtime_ns: int) -> tuple[Problem, ...]:
    problems = []
    for line_no, record in iter_jsonl(path):
        with at_line(path, line_no):
            if record["candidates"]:
                problem = policy_problem(policy_truth_from_record(record))
                problems.append(problem if record.get("game") is None else replace(problem, game=record["game"]))
    return tuple(problems)


# -- A: --------------------------------------------------------------------------------------------


def arbiter_problem_from_case(row: dict) -> Problem:
    """A held-out case row {"fen", "history_before", "move", ...} -> Problem (truth recomputed)."""
    history = history_with_move(row["history_before"], row["move"])
    return arbiter_problem(arbiter_truth(row["fen"], row["move"], history))


def arbiter_training_stream(path: str | Path, shares: Mapping[str, float], seed: int, pool_size: int,
                            pool_walks: int, pool_cache: str | None) -> ArbiterStream:
    """The A: training stream over the positions of an annotated JSONL(.gz) file (pool_cache: where
    its rare-case pools are stored and reused, None = collected in every process)."""
    positions = _positions_cached(*_file_key(Path(path)))
    return ArbiterStream(positions, shares, seed, pool_size, pool_walks, pool_cache)


@lru_cache(maxsize=8)
def _positions_cached(path: str, mtime_ns: int) -> tuple[tuple[str, tuple[str, ...]], ...]:
    positions = []
    for line_no, record in iter_jsonl(path):
        with at_line(path, line_no):
            positions.append((chess.Board(record["fen"]).fen(), tuple(record.get("history", []))))
    return tuple(positions)


def load_arbiter_problems(split: str, source: Source = None) -> list[Problem] | ArbiterStream:
    """A: problems. "validation" / "test" / "final": that held-out part's case file (all rows). "train": the data
    config's training stream (a path source has no case shares: use arbiter_training_stream)."""
    check_split(split)
    if isinstance(source, Mapping):
        return _arbiter_from_config(split, source)
    if split == "train":
        raise ValueError("A: training problems come from a data config (conf/data/*.yaml) or arbiter_training_stream")
    path = Path(source) if source is not None else _bundled(f"arbiter_{split}")
    return list(_arbiter_cases_cached(*_file_key(path)))


@lru_cache(maxsize=8)
def _arbiter_cases_cached(path: str, mtime_ns: int) -> tuple[Problem, ...]:
    problems = []
    for line_no, row in iter_jsonl(path):
        with at_line(path, line_no):
            problems.append(arbiter_problem_from_case(row))
    return tuple(problems)


# -- data config dispatch --------------------------------------------------------------------------


def has_final_pool(cfg: Mapping) -> bool:
    """Whether a data config names a final pool (data.policy_final and data.arbiter_final)."""
    return cfg.get(f"policy_{FINAL}") is not None and cfg.get(f"arbiter_{FINAL}") is not None


def _bundled(key: str) -> Path:
    """The bundled file of a part; the bundled data has no final pool."""
    if key not in BUNDLED:
        raise ValueError(f"this data has no final pool (data.{key} is null): data=selfplay holds one "
                         "(rookworld/data/selfplay/final.jsonl.xz), or name your own in data.policy_final / arbiter_final")
    return BUNDLED[key]


def _from_hub(split: str, cfg: Mapping) -> bool:
    if cfg["kind"] != "rookworld7m" or split == FINAL:
        return False
    if cfg["heldout"] not in HELDOUT_SOURCES:
        raise ValueError(f"data.heldout={cfg['heldout']!r}: expected one of {' | '.join(HELDOUT_SOURCES)}")
    return split == "train" or cfg["heldout"] == "hub"


def _policy_from_config(split: str, cfg: Mapping) -> list[Problem]:
    _check_kind(cfg)
    if _from_hub(split, cfg):
        return list(load_rookworld7m_config(split, cfg).policy)
    return load_policy_problems(split, cfg.get(f"policy_{split}"))


def _arbiter_from_config(split: str, cfg: Mapping) -> list[Problem]:
    _check_kind(cfg)
    if _from_hub(split, cfg):
        return list(load_rookworld7m_config(split, cfg).arbiter)
    if split in (*HELD_OUT_SPLITS, FINAL):
        return load_arbiter_problems(split, cfg.get(f"arbiter_{split}"))
    path = cfg["arbiter_train"] or cfg["policy_train"] or BUNDLED["policy_train"]
    return arbiter_training_stream(path, dict(cfg["arbiter_cases"]), int(cfg["arbiter_seed"]),
                                   int(cfg["arbiter_pool_size"]), int(cfg["arbiter_pool_walks"]),
                                   cfg["arbiter_pool_cache"])


def _check_kind(cfg: Mapping) -> None:
    if cfg["kind"] not in DATA_KINDS:
        raise ValueError(f"data.kind must be bundled | rookworld7m, got {cfg['kind']!r}")


def clear_file_caches() -> None:
    """Forget every parsed data file (the next load reads and parses it again: load-time measurements)."""
    for cached in (_policy_problems_cached, _positions_cached, _arbiter_cases_cached):
        cached.cache_clear()


def _file_key(path: Path) -> tuple[str, int]:
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {str(path)!r}")
    return str(path.resolve()), path.stat().st_mtime_ns


# -- task-mix sampling -----------------------------------------------------------------------------


class ProblemSampler:
    """Seeded task-mix sampler with epoch-style shuffling and resumable state.

    A task's problems are a list or an endless stream (ArbiterStream). A list is visited in a fresh
    permutation per epoch (derived from (seed, task, epoch)), without replacement within an epoch;
    a stream is read in order (it is already seeded and shuffled). Task counts per batch follow the
    weights exactly in the long run: each task accumulates n * weight of credit per batch and
    gets floor(credit) slots, the leftover slots going to the largest remainders. The batch order is
    then shuffled by an rng derived from (seed, batch index).
    """

    def __init__(
        self,
        policy_problems: list[Problem],
        arbiter_problems: list[Problem] | ArbiterStream,
        weights: Mapping[str, float] | None = None,
        seed: int = 0,
        difficulty: DifficultyState | None = None,
    ) -> None:
        self.problems = {"P": list(policy_problems), "A": _as_source(arbiter_problems)}
        self.weights = _validate_weights(dict(weights or {"P": 0.8, "A": 0.2}), self.problems)
        self.seed = int(seed)
        self.difficulty = difficulty  # filters and orders the list tasks (rookworld/data/difficulty.py)
        self._epoch = {task: 0 for task in self.problems}
        self._cursor = {task: 0 for task in self.problems}
        self._credit = {task: 0.0 for task in self.problems}
        self._batches = 0
        self._orders = {task: self._order(task, 0) for task in self.problems}

    def sample(self, n: int) -> list[Problem]:
        if n < 0:
            raise ValueError(f"sample size must be >= 0, got {n!r}")
        batch = [p for task, count in self._task_counts(n).items() for p in self._take(task, count)]
        random.Random(f"{self.seed}:batch:{self._batches}").shuffle(batch)
        self._batches += 1
        return batch

    def _task_counts(self, n: int) -> dict[str, int]:
        for task, weight in self.weights.items():
            self._credit[task] += n * weight
        counts = {task: max(0, math.floor(self._credit[task] + 1e-9)) for task in self.weights}
        leftover = n - sum(counts.values())
        active = [task for task, weight in self.weights.items() if weight > 0]
        for task in sorted(active, key=lambda t: (counts[t] - self._credit[t], t))[:leftover]:
            counts[task] += 1
        for task, count in counts.items():
            self._credit[task] -= count
        return counts

    def _take(self, task: str, count: int) -> list[Problem]:
        if isinstance(self.problems[task], ArbiterStream):
            start = self._cursor[task]
            self._cursor[task] += count
            return [self.problems[task][i] for i in range(start, start + count)]
        out, passed_over = [], 0  # passed_over: problems filtered out since the last one kept
        while len(out) < count:
            if self._cursor[task] == len(self._orders[task]):
                self._epoch[task] += 1
                self._cursor[task] = 0
                self._orders[task] = self._order(task, self._epoch[task])
            problem = self.problems[task][self._orders[task][self._cursor[task]]]
            self._cursor[task] += 1
            if self.difficulty is None or self.difficulty.keeps(problem, self._epoch[task]):
                out.append(problem)
                passed_over = 0
                continue
            passed_over += 1
            if passed_over > len(self._orders[task]) and self.difficulty.out_of_band_weight == 0:
                raise ValueError(f"difficulty.filter: all {len(self._orders[task])} {task}: problems are out of band "
                                 f"(pass rate <= difficulty.low or >= difficulty.high) and "
                                 f"difficulty.out_of_band_weight=0: nothing left to train on")
        return out

    def _order(self, task: str, epoch: int) -> list[int]:
        if isinstance(self.problems[task], ArbiterStream):
            return []
        order = list(range(len(self.problems[task])))
        random.Random(f"{self.seed}:{task}:{epoch}").shuffle(order)
        return order if self.difficulty is None else self.difficulty.order(self.problems[task], order)

    def epoch(self, task: str) -> int:
        """Completed passes over `task`'s problems."""
        return self._epoch[task]

    def _sizes(self) -> dict[str, int | str]:
        return {task: "stream" if isinstance(p, ArbiterStream) else len(p) for task, p in self.problems.items()}

    def state_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "weights": dict(self.weights),
            "sizes": self._sizes(),
            "epoch": dict(self._epoch),
            "cursor": dict(self._cursor),
            "credit": dict(self._credit),
            "batches": self._batches,
            **({"difficulty": self.difficulty.state_dict()} if self.difficulty is not None else {}),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        sizes = self._sizes()
        if dict(state["sizes"]) != sizes:
            raise ValueError(f"sampler state is for problem counts {dict(state['sizes'])}, these are {sizes}")
        self.seed = int(state["seed"])
        self.weights = _validate_weights(dict(state["weights"]), self.problems)
        self._epoch = dict(state["epoch"])
        self._cursor = dict(state["cursor"])
        self._credit = dict(state["credit"])
        self._batches = int(state["batches"])
        if self.difficulty is not None and "difficulty" in state:  # absent: a checkpoint of a run without it
            self.difficulty.load_state_dict(state["difficulty"])
        self._orders = {task: self._order(task, self._epoch[task]) for task in self.problems}


def _as_source(problems: list[Problem] | ArbiterStream) -> list[Problem] | ArbiterStream:
    return problems if isinstance(problems, ArbiterStream) else list(problems)


def _validate_weights(weights: dict[str, float], problems: Mapping[str, list]) -> dict[str, float]:
    unknown = set(weights) - set(problems)
    if unknown:
        raise ValueError(f"task_mix has unknown tasks {sorted(unknown)}; expected P and A")
    full = {task: float(weights.get(task, 0.0)) for task in problems}
    for task, weight in full.items():
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"task_mix.{task} must be a finite number >= 0, got {weight!r}")
    total = sum(full.values())
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"task_mix weights must sum to 1, got {total!r} ({full})")
    for task, weight in full.items():
        if weight > 0 and not problems[task]:
            raise ValueError(f"task_mix.{task}={weight!r} but there are no {task}: problems")
    return full
