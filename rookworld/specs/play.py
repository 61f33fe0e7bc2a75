"""PlaySpec: `python -m rookworld.play` (conf/play.yaml): games of a model against Stockfish at fixed node
limits and against itself (docs/play.md)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rookworld.specs.model import Model
from rookworld.specs.rules import is_number, one_of, require, require_bool
from rookworld.specs.run import check_device
from rookworld.specs.sampling import Sampling
from rookworld.specs.tracking import Tracking

MODES = ("model", "calibrate")


@dataclass(frozen=True)
class Play:
    mode: str
    levels: tuple[int, ...]
    anchors: dict[int, float]
    games_per_level: int
    self_play_games: int
    opening_plies: int
    max_plies: int
    greedy: bool
    batch_size: int
    engine_path: str
    engine_hash_mb: int

    def __post_init__(self):
        one_of("play.mode", self.mode, MODES)
        require(bool(self.levels) and all(isinstance(n, int) and n >= 1 for n in self.levels)
                and list(self.levels) == sorted(set(self.levels)), "play.levels", list(self.levels),
                "must be distinct node limits >= 1 in increasing order")
        require(all(isinstance(n, int) for n in self.anchors) and all(is_number(v) for v in self.anchors.values()),
                "play.anchors", self.anchors, "must map node limits to Elo numbers")
        if self.mode == "model":
            missing = [n for n in self.levels if n not in self.anchors]
            require(not missing, "play.anchors", self.anchors, f"has no Elo for the level(s) {missing}: calibrate them "
                    "(play.mode=calibrate, docs/play.md)")
        require(isinstance(self.games_per_level, int) and self.games_per_level >= 2 and self.games_per_level % 2 == 0,
                "play.games_per_level", self.games_per_level, "must be an even integer >= 2 (colours swapped)")
        for key, least in (("self_play_games", 0), ("opening_plies", 0), ("max_plies", 1), ("batch_size", 1),
                           ("engine_hash_mb", 1)):
            value = getattr(self, key)
            require(isinstance(value, int) and value >= least, f"play.{key}", value, f"must be an integer >= {least}")
        require_bool(self.greedy, "play.greedy")


@dataclass(frozen=True)
class PlaySpec:
    seed: int
    device: str
    cpu_threads: int | None
    model: Model
    sampling: Sampling
    tracking: Tracking
    play: Play
    resolved: dict[str, Any] = field(repr=False, compare=False)  # as in RunSpec

    def __post_init__(self):
        check_device(self.device, present=False)
        require(self.cpu_threads is None or isinstance(self.cpu_threads, int) and self.cpu_threads >= 1,
                "cpu_threads", self.cpu_threads, "must be an integer >= 1, or null (torch's choice)")
