"""conf/data/: the training and held-out problems, one spec per source (data=bundled|rookworld7m). The
loaders (rookworld/data/positions.py) read a spec's fields as a mapping: `as_mapping()`."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from rookworld import final_pool
from rookworld.data.arbiter_stream import check_case_shares
from rookworld.data.positions import DATA_KINDS, HELDOUT_SOURCES
from rookworld.specs.rules import ConfigError, one_of, require, require_option


FILE_KEYS = ("policy_train", "policy_validation", "policy_test", "policy_final", "arbiter_train", "arbiter_validation",
             "arbiter_test", "arbiter_final")


@dataclass(frozen=True)
class BundledData:
    """Positions shipped in rookworld/data/bundled/; the A: training stream dealt from them."""
    kind: str
    policy_train: str | None
    policy_validation: str | None
    policy_test: str | None
    policy_final: str | None  # None: no final pool
    arbiter_train: str | None
    arbiter_validation: str | None
    arbiter_test: str | None
    arbiter_final: str | None
    arbiter_cases: dict[str, float]
    arbiter_pool_size: int
    arbiter_pool_walks: int
    arbiter_pool_cache: str | None
    arbiter_seed: int

    def __post_init__(self):
        require_option("data", "kind", self.kind, DATA_KINDS, "bundled")
        try:
            check_case_shares(self.arbiter_cases)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        require(self.arbiter_pool_size >= 1, "data.arbiter_pool_size", self.arbiter_pool_size, "must be >= 1")
        require(self.arbiter_pool_walks >= 1, "data.arbiter_pool_walks", self.arbiter_pool_walks, "must be >= 1")
        require((self.policy_final is None) == (self.arbiter_final is None), "data.policy_final", self.policy_final,
                f"a final pool has both parts: data.arbiter_final is {self.arbiter_final!r}")
        for key in FILE_KEYS:
            path = getattr(self, key)
            require(path is None or Path(path).is_file(), f"data.{key}", path,
                    "no such file (a path is read from the working directory; the data's README says which command makes it)")
            if key not in final_pool.KEYS:
                final_pool.refuse_path(f"data.{key}", path)

    def as_mapping(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RookWorld7MData:
    """The published jrahn/rookworld_7m rows with the known defects corrected (rookworld/data/rookworld7m.py)."""
    kind: str
    repo_id: str
    revision: str | None
    train_files: tuple[str, ...]
    heldout_files: tuple[str, ...]
    heldout: str
    max_policy_rows: int | None
    max_arbiter_rows: int | None
    policy_validation: str | None
    policy_test: str | None
    arbiter_validation: str | None
    arbiter_test: str | None

    def __post_init__(self):
        require_option("data", "kind", self.kind, DATA_KINDS, "rookworld7m")
        one_of("data.heldout", self.heldout, HELDOUT_SOURCES)
        for key in ("policy_validation", "policy_test", "arbiter_validation", "arbiter_test"):
            final_pool.refuse_path(f"data.{key}", getattr(self, key))

    def as_mapping(self) -> dict:
        return asdict(self)


Data = BundledData | RookWorld7MData
