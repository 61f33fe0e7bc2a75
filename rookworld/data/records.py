"""JSONL records: plain, gzipped or xz'd files read and written line by line; a bad line raises one
ValueError naming path:line. Also the split names and the position key that deduplicates positions."""

from __future__ import annotations

import gzip
import io
import lzma
import json
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterable, Iterator

HELD_OUT_SPLITS = ("validation", "test")  # validation: all selection; test: the final report only
FINAL = "final"  # the final pool, where the data has one: a staged sweep's confirmation reads it, nothing else
SPLITS = ("train", *HELD_OUT_SPLITS, FINAL)


def open_text(path: str | Path, mode: str = "rt") -> IO[str]:
    """Open plain, .gz and .xz text files alike."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, mode, encoding="utf-8")  # type: ignore[return-value]
    if path.suffix == ".xz":
        return lzma.open(path, mode, encoding="utf-8")  # type: ignore[return-value]
    return open(path, mode, encoding="utf-8")


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line; a line that is not a JSON object raises
    ValueError naming path:line."""
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            with at_line(path, line_no):
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise TypeError(f"expected a JSON object, got {line.strip()[:80]!r}")
            yield line_no, record


def read_jsonl(path: str | Path) -> list[dict]:
    return [record for _, record in iter_jsonl(path)]


@contextmanager
def at_line(path: str | Path, line_no: int) -> Iterator[None]:
    """Re-raise a bad record's KeyError / TypeError / ValueError as one ValueError naming path:line."""
    try:
        yield
    except KeyError as exc:
        raise ValueError(f"{path}:{line_no}: missing key {exc.args[0]!r}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{line_no}: not valid JSON ({exc.msg}, column {exc.colno})") from exc
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}:{line_no}: {exc}") from exc


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> int:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    n = 0
    if Path(path).suffix == ".gz":
        # mtime=0 keeps the gzip bytes reproducible for the same records
        raw = gzip.GzipFile(path, "wb", mtime=0)
        f: IO[str] = io.TextIOWrapper(raw, encoding="utf-8")
    elif Path(path).suffix == ".xz":
        f = lzma.open(path, "wt", encoding="utf-8", preset=6)  # ~25% smaller than gzip; the same bytes each time
    else:
        f = open(path, "w", encoding="utf-8")
    with f:
        for row in rows:
            f.write(json.dumps(row, separators=(",", ":")) + "\n")
            n += 1
    return n


def position_key(fen: str) -> str:
    """Placement, side to move, castling, en passant: clocks do not make a new position."""
    return " ".join(fen.split()[:4])


def excluded_positions(paths: list[str]) -> frozenset[str]:
    """The position keys of the records of these JSONL files (the data commands' --exclude files)."""
    keys: set[str] = set()
    for path in paths:
        for line_no, record in iter_jsonl(path):
            with at_line(path, line_no):
                keys.add(position_key(record["fen"]))
    return frozenset(keys)


def new_only(rows: Iterable[dict], exclude: frozenset[str]) -> Iterator[dict]:
    """The rows whose position is new: not in `exclude`, not seen earlier in `rows`; in order."""
    seen = set(exclude)
    for row in rows:
        key = position_key(row["fen"])
        if key not in seen:
            seen.add(key)
            yield row


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {' | '.join(SPLITS)}, got {split!r}")
