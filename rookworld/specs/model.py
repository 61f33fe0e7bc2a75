"""conf/model/: where the policy's weights come from, one spec per kind of source: a hub repo
(model=rookworld_lm_124m), a shipped folder (model=rookworld_tiny) or a random model of a given shape
(model=tiny, gpt2_124m_random). Each gives rookworld.model.hub.load_model its arguments."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from rookworld.specs.rules import one_of, require, require_int

DTYPES = ("auto", "float32", "bfloat16")


def _check_dtype(dtype: str) -> None:
    one_of("model.dtype", dtype, DTYPES)


def _check_path(path: str | None) -> None:
    """A local model folder is checked here, before the model loads (and before any run folder is used)."""
    require(path is None or Path(path).is_dir(), "model.path", path, "no such folder (a local hub-format model folder)")


@dataclass(frozen=True)
class HubModel:
    source: str
    revision: str | None
    path: str | None
    dtype: str

    def __post_init__(self):
        _check_dtype(self.dtype)
        _check_path(self.path)

    def load_arguments(self) -> dict:
        return {"source": self.source, "revision": self.revision, "path": self.path}

    def describe(self) -> str:
        return self.path or self.source


@dataclass(frozen=True)
class FolderModel:
    source: str
    path: str | None
    dtype: str

    def __post_init__(self):
        _check_dtype(self.dtype)
        _check_path(self.path)

    def load_arguments(self) -> dict:
        return {"source": self.source, "path": self.path}

    def describe(self) -> str:
        return self.path or self.source


@dataclass(frozen=True)
class TinyShape:
    seed: int
    n_layer: int
    n_head: int
    n_embd: int
    n_positions: int
    vocab_size: int | None

    def __post_init__(self):
        for key in ("n_layer", "n_head", "n_embd", "n_positions"):
            require_int(getattr(self, key), f"model.tiny.{key}", 1)
        require(self.n_embd % self.n_head == 0, "model.tiny.n_embd", self.n_embd,
                f"must be a multiple of model.tiny.n_head={self.n_head}")
        require(self.vocab_size is None or (isinstance(self.vocab_size, int) and self.vocab_size >= 1),
                "model.tiny.vocab_size", self.vocab_size, "must be an integer >= 1 or null (the tokenizer's)")


@dataclass(frozen=True)
class RandomModel:
    path: str | None
    tiny: TinyShape
    dtype: str

    def __post_init__(self):
        _check_dtype(self.dtype)
        _check_path(self.path)

    def load_arguments(self) -> dict:
        return {"path": self.path, "tiny": asdict(self.tiny)}

    def describe(self) -> str:
        return self.path or "tiny"


Model = HubModel | FolderModel | RandomModel
