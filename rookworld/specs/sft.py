"""SftSpec: `python -m rookworld.sft` (conf/sft.yaml): its own knobs plus the model, optimizer, data,
evaluation and tracking groups the GRPO run uses too."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rookworld.specs.data import Data
from rookworld.specs.eval import Eval
from rookworld.specs.model import Model
from rookworld.specs.optimizer import Optimizer
from rookworld.specs.reward import Reward
from rookworld.specs.rules import one_of, require
from rookworld.specs.run import check_device
from rookworld.specs.sampling import Sampling
from rookworld.specs.tracking import Tracking

LOSS_ON = ("document", "completion")  # sft.loss_on: which tokens of a document the loss trains on (data/documents.py)
SAVE_DTYPES = ("float32", "bfloat16")
PACKED_ATTENTION = ("sdpa", "flex")  # sft.pack_attention (rookworld/model/gpt2.py's document attention)


@dataclass(frozen=True)
class Sft:
    steps: int
    batch_size: int
    seq_len: int
    pack: bool
    pack_window: int
    pack_attention: str
    compile: bool
    max_grad_norm: float
    arbiter_fraction: float
    arbiter_docs_per_position: int
    loss_on: str
    arbiter_cases: dict[str, float]
    num_workers: int
    heldout_docs: int
    eval_every: int
    log_every: int
    time_limit_min: float | None
    save_dir: str
    save_dtype: str

    def __post_init__(self):
        for key in ("steps", "batch_size", "seq_len", "pack_window", "arbiter_docs_per_position", "heldout_docs",
                    "log_every"):
            value = getattr(self, key)
            require(isinstance(value, int) and value >= 1, f"sft.{key}", value, "must be an integer >= 1")
        require(isinstance(self.eval_every, int) and self.eval_every >= 0, "sft.eval_every", self.eval_every,
                "must be an integer >= 0 (0 = only at the end)")
        require(self.max_grad_norm >= 0, "sft.max_grad_norm", self.max_grad_norm, "must be >= 0 (0 = off)")
        require(0 <= self.arbiter_fraction <= 1, "sft.arbiter_fraction", self.arbiter_fraction, "must be in [0, 1]")
        require(self.num_workers >= 0, "sft.num_workers", self.num_workers, "must be >= 0")
        require(self.time_limit_min is None or self.time_limit_min > 0, "sft.time_limit_min", self.time_limit_min,
                "must be > 0 or null (no limit)")
        one_of("sft.save_dtype", self.save_dtype, SAVE_DTYPES)
        one_of("sft.loss_on", self.loss_on, LOSS_ON)
        one_of("sft.pack_attention", self.pack_attention, PACKED_ATTENTION)
        for key in ("pack", "compile"):
            require(isinstance(getattr(self, key), bool), f"sft.{key}", getattr(self, key), "must be true or false")


@dataclass(frozen=True)
class SftSpec:
    seed: int
    device: str
    model: Model
    optimizer: Optimizer
    sampling: Sampling
    reward: Reward
    data: Data
    eval: Eval
    tracking: Tracking
    sft: Sft
    resolved: dict[str, Any] = field(repr=False, compare=False)  # as in RunSpec

    def __post_init__(self):
        check_device(self.device, present=False)
