"""Shared fixtures: the tiny model (created, saved and loaded through the real loading path); from
sweep_helpers, the suite's one PostgreSQL server and its one set of sweep launches (a session fixture
imported by a test module would be set up again for that module)."""

import os
import shutil
from pathlib import Path

import pytest
import torch
from run_progress import RunProgress
from stopped_run import become_subreaper, stop_leftovers, stop_on_sigterm
from sweep_helpers import postgres_url, postgresql_sweeps  # noqa: F401  (fixtures)

from rookworld.model.gpt2 import GPT
from rookworld.model.hub import create_tiny, load_pretrained
from rookworld.model.tokenizer import ChessTokenizer

if os.environ.get("PYTEST_XDIST_WORKER"):  # pyproject's `-n 3`: one thread per worker, so that the workers on
    torch.set_num_threads(1)               # two cores do not fight over more threads still; its subprocesses too
    os.environ["OMP_NUM_THREADS"] = "1"


@pytest.fixture(scope="session")
def tiny_tokenizer() -> ChessTokenizer:
    return ChessTokenizer.tiny()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random GPT-2 (seed 0) saved in the hub format; treat the folder as read-only."""
    return create_tiny(tmp_path_factory.mktemp("tiny-model"), seed=0)


@pytest.fixture
def tiny_model_copy(tiny_model_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the tiny model folder per test (tests may delete or rewrite its files)."""
    return Path(shutil.copytree(tiny_model_dir, tmp_path / "tiny-model"))


@pytest.fixture
def tiny_model(tiny_model_dir: Path) -> tuple[GPT, ChessTokenizer]:
    """A fresh float32 CPU copy of the tiny model per test (tests may train or modify it)."""
    return load_pretrained(str(tiny_model_dir))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first (a stable sort), so that pyproject's workers are all busy until the end
    instead of one finishing the longest tests alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_configure(config: pytest.Config) -> None:
    """Every pytest process stops cleanly on SIGTERM and ends what it left running (tests/stopped_run.py);
    the controller of a quiet run notes its progress (tests/run_progress.py)."""
    become_subreaper()
    stop_on_sigterm()
    if not os.environ.get("PYTEST_XDIST_WORKER") and config.get_verbosity() < 0:
        config.pluginmanager.register(RunProgress(), "rookworld-run-progress")


def pytest_unconfigure(config: pytest.Config) -> None:
    stop_leftovers()
