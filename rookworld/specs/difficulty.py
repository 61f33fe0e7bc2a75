"""conf/difficulty/: which training problems GRPO trains on, by the policy's pass rate on each
(rookworld/data/difficulty.py): a filter of the ones it always or never solves, and a curriculum."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rookworld.data.difficulty import CURRICULA, DifficultyState, read_pass_rates
from rookworld.specs.rules import ConfigError, is_number, one_of, require, require_bool


@dataclass(frozen=True)
class Difficulty:
    filter: bool
    low: float
    high: float
    out_of_band_weight: float
    curriculum: str
    pass_rates: str | None

    def __post_init__(self):
        require_bool(self.filter, "difficulty.filter")
        for key in ("low", "high", "out_of_band_weight"):
            value = getattr(self, key)
            require(is_number(value) and 0.0 <= value <= 1.0, f"difficulty.{key}", value, "must be in [0, 1]")
        require(self.low < self.high, "difficulty.low", self.low, f"must be below difficulty.high={self.high}")
        one_of("difficulty.curriculum", self.curriculum, CURRICULA)
        require(self.curriculum == "none" or self.pass_rates is not None, "difficulty.curriculum", self.curriculum,
                "orders by the starting pass rates: set difficulty.pass_rates (python -m rookworld.commands.pass_rates)")
        require(self.pass_rates is None or Path(self.pass_rates).is_file(), "difficulty.pass_rates", self.pass_rates,
                "no such file (python -m rookworld.commands.pass_rates writes one)")

    @property
    def enabled(self) -> bool:
        return self.filter or self.curriculum != "none"

    def build(self, seed: int) -> DifficultyState | None:
        """The sampler's difficulty state (the starting estimates read), or None when both uses are off."""
        if not self.enabled:
            return None
        try:
            starting = read_pass_rates(self.pass_rates) if self.pass_rates is not None else {}
        except ValueError as error:  # a malformed row: one line naming the file, the line and the key
            raise ConfigError(f"difficulty.pass_rates: {error}") from None
        weight = self.out_of_band_weight if self.filter else 1.0
        return DifficultyState(self.low, self.high, weight, self.curriculum, starting, seed)
