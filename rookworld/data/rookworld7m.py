"""Loader for the published `jrahn/rookworld_7m` rows (one `text` column), defects corrected.

- P: rows -> PolicyTruth with the candidates ranked by their E value, highest first. The B label
  is never trusted: for Black to move the published B is the *lowest*-ranked candidate
  (docs/tasks.md). On an E tie the B move goes first among the tied moves.
- A: rows (with or without the "A: " prefix) -> the truth recomputed by python-chess from
  (FEN, move, history) with rookworld.tasks.arbiter_truth, so illegal moves published as legal
  transitions get reward -1.0 / truncated 1. Only the first three fields of a row are read.

Files come from the Hugging Face hub (`hf_hub_download` / `snapshot_download` with
repo_type="dataset"); an entry of `train_files` / `heldout_files` that is an existing local path
is read directly (parquet with a `text` column, or JSONL(.gz) objects with a `text` key).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import chess

from rookworld.data.records import at_line, check_split, iter_jsonl
from rookworld.tasks import (
    Candidate,
    PolicyTruth,
    Problem,
    arbiter_problem,
    arbiter_truth,
    history_with_move,
    parse_policy,
    policy_problem,
    render_arbiter_completion,
)

DEFAULT_REPO = "jrahn/rookworld_7m"
DEFAULT_TRAIN_FILES = ("data/train-*.parquet",)
DEFAULT_HELDOUT_FILES = ("data/test-*.parquet",)
GLOB_CHARS = set("*?[")


class DatasetUnavailableError(FileNotFoundError):
    """The dataset files could not be fetched (offline, wrong repo or file names)."""


@dataclass(frozen=True)
class RookWorldRows:
    policy: tuple[Problem, ...]
    arbiter: tuple[Problem, ...]
    skipped: int  # rows that did not parse, or P: rows with illegal / duplicate candidates
    relabelled: int  # P: rows whose published B is not the highest-E candidate
    corrected: int  # A: rows whose published completion differs from the python-chess truth


# -- rows -> problems ------------------------------------------------------------------------------


def policy_truth_from_text(text: str) -> PolicyTruth | None:
    """A P: row -> PolicyTruth ranked by E descending, or None when the row is unusable."""
    row = _policy_row(text)
    return None if row is None else row[0]


def _policy_row(text: str) -> tuple[PolicyTruth, bool] | None:
    """A P: row -> (PolicyTruth, whether the published B differs from its rank-1 move), or None."""
    text = text.strip()  # a row with leading whitespace is the same row
    answer = parse_policy(text)
    fen = text[len("P:") : text.find("M:")].strip()
    if answer is None or not answer.moves or len(answer.moves) != len(answer.evals):
        return None
    if len(set(answer.moves)) != len(answer.moves) or not _all_legal(fen, answer.moves):
        return None
    order = sorted(
        range(len(answer.moves)),
        key=lambda i: (-answer.evals[i], answer.moves[i] != answer.best_move, i),
    )
    candidates = tuple(Candidate(answer.moves[i], answer.evals[i]) for i in order)
    truth = PolicyTruth(fen=fen, candidates=candidates)  # as published: the prompt the model saw
    return truth, answer.best_move != truth.best_move


def _all_legal(fen: str, moves: list[str]) -> bool:
    try:
        board = chess.Board(fen)
        return all(chess.Move.from_uci(m) in board.legal_moves for m in moves)
    except ValueError:
        return False


def arbiter_fields(text: str) -> list[str] | None:
    body = text.strip()
    if body.startswith("A:"):
        body = body[2:].lstrip()
    fields = body.split("+")
    return fields if len(fields) >= 3 else None


def arbiter_problem_from_text(text: str) -> tuple[Problem, bool] | None:
    """An A: row -> (Problem with recomputed truth, whether the published completion was wrong)."""
    fields = arbiter_fields(text)
    if fields is None:
        return None
    fen, move, history = fields[0].strip(), fields[1].strip(), fields[2].split()
    if history and history[-1] == move:  # published histories mostly end with the move already
        history.pop()
    try:
        truth = arbiter_truth(fen, move, history_with_move(history, move))
    except ValueError:
        return None
    published = "+".join(f.strip() for f in fields[3:])  # fields hold no "+": same as comparing them
    return arbiter_problem(truth), published != render_arbiter_completion(truth)


def problems_from_texts(
    texts: Iterable[str], max_policy: int | None = None, max_arbiter: int | None = None
) -> RookWorldRows:
    """Convert rows until both per-task limits are reached (None = no limit)."""
    policy: list[Problem] = []
    arbiter: list[Problem] = []
    skipped = relabelled = corrected = 0
    for text in texts:
        if _full(policy, max_policy) and _full(arbiter, max_arbiter):
            break
        if text.lstrip().startswith("P:"):
            if _full(policy, max_policy):
                continue
            row = _policy_row(text)
            if row is None:
                skipped += 1
                continue
            policy.append(policy_problem(row[0]))
            relabelled += row[1]
        elif not _full(arbiter, max_arbiter):
            converted = arbiter_problem_from_text(text)
            if converted is None:
                skipped += 1
                continue
            arbiter.append(converted[0])
            corrected += converted[1]
    return RookWorldRows(tuple(policy), tuple(arbiter), skipped, relabelled, corrected)


def _full(problems: list, limit: int | None) -> bool:
    return limit is not None and len(problems) >= limit


# -- files -----------------------------------------------------------------------------------------


def iter_texts(path: Path) -> Iterator[str]:
    """`text` values of a parquet or JSONL(.gz) file, in order."""
    if path.suffix == ".parquet":
        yield from _parquet_texts(path)
        return
    for line_no, record in iter_jsonl(path):
        with at_line(path, line_no):
            text = record["text"]
        yield text


def _parquet_texts(path: Path) -> Iterator[str]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(f"reading {path.name} needs pyarrow (pip install pyarrow)") from None
    for batch in pq.ParquetFile(path).iter_batches(batch_size=8192, columns=["text"]):
        yield from batch.column(0).to_pylist()


def resolve_files(entries: Sequence[str], repo_id: str, revision: str | None) -> list[Path]:
    """Local paths as they are; other entries are files or glob patterns in the hub dataset repo."""
    local = [Path(e) for e in entries if Path(e).exists()]
    remote = [e for e in entries if not Path(e).exists()]
    return local + (_download(remote, repo_id, revision) if remote else [])


def _download(entries: list[str], repo_id: str, revision: str | None) -> list[Path]:
    from huggingface_hub import hf_hub_download, snapshot_download

    try:
        if any(GLOB_CHARS & set(e) for e in entries):
            root = Path(snapshot_download(repo_id, repo_type="dataset", revision=revision, allow_patterns=entries))
            files = sorted(p for e in entries for p in root.glob(e) if p.is_file())
        else:
            files = [Path(hf_hub_download(repo_id, e, repo_type="dataset", revision=revision)) for e in entries]
    except Exception as exc:  # offline, unknown repo / file, auth: all one actionable message
        reason = " ".join(str(exc).split())  # one line: hub errors span several
        raise DatasetUnavailableError(
            f"cannot fetch {entries} from dataset {repo_id!r} ({type(exc).__name__}: {reason}); offline? "
            f"download it elsewhere and list local files in data.train_files / data.heldout_files"
        ) from exc
    if not files:
        raise DatasetUnavailableError(f"no files match {entries} in dataset {repo_id!r} (data.train_files)")
    return files


# -- entry points ----------------------------------------------------------------------------------


def load_rookworld7m(
    split: str = "train",
    *,
    repo_id: str = DEFAULT_REPO,
    revision: str | None = None,
    train_files: Sequence[str] = DEFAULT_TRAIN_FILES,
    heldout_files: Sequence[str] = DEFAULT_HELDOUT_FILES,
    max_policy_rows: int | None = None,
    max_arbiter_rows: int | None = None,
) -> RookWorldRows:
    """Problems from the dataset's train files ("train") or its test files (a held-out split)."""
    check_split(split)
    entries = tuple(train_files if split == "train" else heldout_files)
    return _load_cached(entries, repo_id, revision, max_policy_rows, max_arbiter_rows)


@lru_cache(maxsize=4)
def _load_cached(
    entries: tuple[str, ...], repo_id: str, revision: str | None, max_policy: int | None, max_arbiter: int | None
) -> RookWorldRows:
    files = resolve_files(entries, repo_id, revision)
    texts = (text for path in files for text in iter_texts(path))
    return problems_from_texts(texts, max_policy, max_arbiter)


def load_rookworld7m_config(split: str, cfg: Mapping) -> RookWorldRows:
    """load_rookworld7m with the keys of conf/data/rookworld7m.yaml."""
    return load_rookworld7m(
        split,
        repo_id=cfg["repo_id"],
        revision=cfg["revision"],
        train_files=tuple(cfg["train_files"]),
        heldout_files=tuple(cfg["heldout_files"]),
        max_policy_rows=cfg["max_policy_rows"],
        max_arbiter_rows=cfg["max_arbiter_rows"],
    )
