"""RoundSpec: `python -m rookworld.warm_start.round` (conf/round.yaml): the supervised loop's spec (conf/sft.yaml)
plus the round's own knobs under `round:`."""
from __future__ import annotations

from dataclasses import dataclass

from rookworld import final_pool
from rookworld.data.shard_pool import position_files
from rookworld.specs.rules import require
from rookworld.specs.sft import SftSpec

AUTO = "auto"


def _auto_or_count(key: str, value, least: int) -> None:
    require(value == AUTO or (isinstance(value, int) and value >= least), f"round.{key}", value,
            f"must be auto or an integer >= {least}")


@dataclass(frozen=True)
class Round:
    seed: int
    budget_min: float
    reserve_min: float
    baseline: str
    carry: list[str]
    exclude: list[str]
    selfplay_dir: str
    nodes: int
    games_per_shard: int
    engine_path: str
    cores: int | str
    engines: int | str
    document_workers: int | str
    min_engines: int
    measure_s: float
    cpu_threads: int
    heldout_policy: int | None
    heldout_arbiter: int | None
    alpha: float
    max_shard_mib: float
    out: str

    def __post_init__(self):
        require(isinstance(self.seed, int) and self.seed >= 0, "round.seed", self.seed, "must be an integer >= 0")
        require(self.budget_min > 0, "round.budget_min", self.budget_min, "must be > 0")
        require(0 < self.reserve_min < self.budget_min, "round.reserve_min", self.reserve_min,
                f"must be > 0 and below round.budget_min={self.budget_min}")
        for key in ("nodes", "games_per_shard"):
            value = getattr(self, key)
            require(isinstance(value, int) and value >= 1, f"round.{key}", value, "must be an integer >= 1")
        _auto_or_count("cores", self.cores, 1)
        _auto_or_count("engines", self.engines, 0)
        _auto_or_count("document_workers", self.document_workers, 0)
        require(isinstance(self.min_engines, int) and self.min_engines >= 0, "round.min_engines", self.min_engines,
                "must be an integer >= 0")
        require(self.measure_s > 0, "round.measure_s", self.measure_s, "must be > 0")
        require(isinstance(self.cpu_threads, int) and self.cpu_threads >= 1, "round.cpu_threads", self.cpu_threads,
                "must be an integer >= 1")
        for key in ("heldout_policy", "heldout_arbiter"):
            value = getattr(self, key)
            require(value is None or (isinstance(value, int) and value >= 1), f"round.{key}", value,
                    "must be an integer >= 1 or null (the whole part)")
        require(0 < self.alpha < 0.5, "round.alpha", self.alpha, "must be in (0, 0.5)")
        require(self.max_shard_mib > 0, "round.max_shard_mib", self.max_shard_mib, "must be > 0")
        for path in position_files(self.carry):
            final_pool.refuse_path("round.carry", path)


@dataclass(frozen=True)
class RoundSpec:
    sft: SftSpec
    round: Round

    def __post_init__(self):
        require(self.sft.eval.score == "chess", "eval.score", self.sft.eval.score,
                "a round decides on the chess score: set eval.score=chess")
