"""BenchSpec: `python -m rookworld.bench` (conf/bench.yaml): the training run plus the `bench` knobs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rookworld.specs.rules import one_of, require
from rookworld.specs.run import RunSpec

DECODERS = ("fast", "plain")


@dataclass(frozen=True)
class Bench:
    warmup: int
    steps: int
    full_length: bool
    decoder: str
    random_weights: Any  # auto | true | false
    random_model: dict[str, int]
    self_check: bool
    profile: bool
    compare_plain_steps: int
    trials: int
    trial_steps: int
    trl: Any  # auto | true | false
    trl_steps: int
    output: str | None

    def __post_init__(self):
        one_of("bench.decoder", self.decoder, DECODERS)
        for key in ("random_weights", "trl"):
            one_of(f"bench.{key}", str(getattr(self, key)).lower(), ("auto", "true", "false"))
        for key, least in (("steps", 1), ("warmup", 0), ("compare_plain_steps", 0), ("trials", 0),
                           ("trial_steps", 1), ("trl_steps", 1)):
            value = getattr(self, key)
            require(isinstance(value, int) and value >= least, f"bench.{key}", value, f"must be an integer >= {least}")


@dataclass(frozen=True)
class BenchSpec:
    run: RunSpec  # conf/bench.yaml without `bench`: the training run benchmarked
    bench: Bench
