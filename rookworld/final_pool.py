"""The final pool (rookworld/data/selfplay/final*.jsonl.xz): the held-out positions a staged sweep's confirmation
alone reads, so that its verdict carries no selection bias. This module is the one that knows them:

- which files they are, by content: a file whose first rows' positions are all final-pool positions is the final
  pool, whatever its name, folder, compression or row order (a copy is refused as the original is);
- the one grant: `confirmation()`, which the staged sweep's worker holds around a confirmation run (no config
  key, tag or command-line value opens it); inside it, and only there, `eval.split=final` is accepted;
- the refusals every door calls (a data path, a carried file, an evaluated split), each one line and raised
  before any model loads;
- the positions every document stream and every self-play run excludes.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path

from rookworld.data.records import FINAL, open_text, position_key
from rookworld.specs.rules import require

FILES = tuple(Path(__file__).parent / "data" / "selfplay" / name for name in ("final.jsonl.xz", "final_arbiter.jsonl.xz"))
KEYS = (f"policy_{FINAL}", f"arbiter_{FINAL}")  # the data keys that name the pool (read under the grant alone)
HEAD_ROWS = 16  # rows of a file compared: its first rows all final-pool positions make it the final pool
_FEN = re.compile(r'"fen"\s*:\s*"([^"]+)"')  # a row's position, without parsing the whole row (action values)
_confirming: ContextVar[bool] = ContextVar("final_pool_confirming", default=False)


@contextmanager
def confirmation() -> Iterator[None]:
    """The staged sweep's confirmation reads the final pool inside this block (rookworld/sweep/staged/rungs.py)."""
    token = _confirming.set(True)
    try:
        yield
    finally:
        _confirming.reset(token)


@lru_cache(maxsize=1)
def position_keys() -> frozenset[str]:
    """The position keys of every row of the final pool's files (P: positions, A: transitions' positions)."""
    return frozenset(key for path in FILES for key in _row_keys(path))


def is_final_pool(path: str | Path) -> bool:
    """Whether the file at `path` is (a copy of) a part of the final pool: its first HEAD_ROWS rows' positions are
    all final-pool positions."""
    head = _row_keys(path, HEAD_ROWS)
    return bool(head) and all(key in position_keys() for key in head)


def refuse_path(key: str, path: str | Path | None) -> None:
    """A one-line ConfigError when the file `key` names is the final pool (None or a missing file: nothing to check)."""
    if path is None or not Path(path).is_file():
        return
    require(not is_final_pool(path), key, str(path), "is the final pool (its rows are final.jsonl.xz's or "
            "final_arbiter.jsonl.xz's positions): a staged sweep's confirmation alone reads it, as data.policy_final "
            "/ arbiter_final")


def refuse_split(key: str, split: str) -> None:
    """A one-line ConfigError for `split` = final outside a staged sweep's confirmation."""
    require(split != FINAL or _confirming.get(), key, split, "the final pool is read by a staged sweep's "
            "confirmation alone (hydra.sweeper.stages.confirm.pool): select on validation, report on test")


def with_final_pool(paths: Sequence[Path]) -> list[Path]:
    """`paths` and the final pool's files (once): what a self-play run must not repeat."""
    listed = {path.resolve() for path in paths}
    return [*paths, *(path for path in FILES if path.resolve() not in listed)]


def _row_keys(path: str | Path, limit: int | None = None) -> list[str]:
    keys = []
    with open_text(path) as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            found = _FEN.search(line)
            if found is None:
                if limit is None:
                    raise ValueError(f"{path}:{line_no}: no \"fen\" in the row")
                return []  # not a file of positions: not the final pool
            keys.append(position_key(found.group(1)))
            if limit is not None and len(keys) == limit:
                break
    return keys
