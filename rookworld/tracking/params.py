"""Formatting for MLflow: params flattened from a config, keys sanitised, values and tags capped,
git state, sample tables, one-line exception text."""
from __future__ import annotations

import json
import logging
import re
import subprocess
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

MAX_PARAMS_TAGS_PER_BATCH = 100  # MLflow's limit on params, and on tags, in one log_batch
MAX_TAG_LENGTH = 8000  # MLflow's limit on a tag value
_MAX_KEY_LENGTH = 250
_MAX_REASON_LENGTH = 1000
_INVALID_KEY_CHARS = re.compile(r"[^/\w.\- :]")


def one_line(exc: BaseException) -> str:
    """"ExcType: message" on one line, capped in length."""
    message = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text[:_MAX_REASON_LENGTH]


def overrides_tag(overrides: Iterable[Any]) -> str:
    """The `rookworld.overrides` tag value: the overrides, space-separated, cut to MLflow's tag limit."""
    return " ".join(str(o) for o in overrides)[:MAX_TAG_LENGTH]


def sanitize_key(key: str) -> str:
    """A metric/param key MLflow accepts: allowed characters only, no empty or '..' segments."""
    cleaned = _INVALID_KEY_CHARS.sub("_", str(key))
    parts = [("_" if p == ".." else p) for p in cleaned.split("/") if p not in ("", ".")]
    return ("/".join(parts) or "_")[:_MAX_KEY_LENGTH]


def _format_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return str(value)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def flatten_config(cfg: DictConfig) -> dict[str, str]:
    """The resolved config as dotted keys -> strings; lists of scalars stay one JSON value."""
    container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False, enum_to_str=True)
    assert isinstance(container, dict)
    container.pop("hydra", None)
    flat: dict[str, str] = {}
    _flatten_into(flat, container, "")
    return flat


def _flatten_into(flat: dict[str, str], node: Any, prefix: str) -> None:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            _flatten_into(flat, value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, list) and node and not all(_is_scalar(v) for v in node):
        for index, value in enumerate(node):
            _flatten_into(flat, value, f"{prefix}.{index}")
    elif isinstance(node, (list, dict)):
        flat[prefix] = json.dumps(node)
    else:
        flat[prefix] = _format_value(node)


def git_state(repo_dir: Path) -> dict[str, str]:
    """`git.commit` and `git.dirty` (tracked files modified) of the repository holding the code."""
    try:
        commit = _git(repo_dir, "rev-parse", "HEAD")
        dirty = bool(_git(repo_dir, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError) as exc:  # no git, not a repository, or git hung
        log.warning("git state unknown for %s (%s)", repo_dir, one_line(exc))
        return {"git.commit": "unknown", "git.dirty": "unknown"}
    return {"git.commit": commit, "git.dirty": json.dumps(dirty)}


def _git(repo_dir: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo_dir), *args], capture_output=True, text=True, check=True, timeout=10
    )
    return result.stdout.strip()


def truncate_params(params: Mapping[str, str], limit: int) -> dict[str, str]:
    """Cap values at `limit` characters (the full config is also logged as config.yaml)."""
    long_keys = [k for k, v in params.items() if len(v) > limit]
    if long_keys:
        log.warning("params truncated to %d characters: %s", limit, ", ".join(long_keys))
    return {k: (v if len(v) <= limit else v[: limit - 3] + "...") for k, v in params.items()}


def table_columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Rows -> columns (union of keys, first-seen order); non-scalars become JSON strings."""
    columns: dict[str, list[Any]] = {}
    for row in rows:
        for key in row:
            columns.setdefault(str(key), [])
    for row in rows:
        for key, values in columns.items():
            value = row.get(key)
            values.append(value if _is_scalar(value) else json.dumps(value, default=str))
    return columns
