"""A new sqlite MLflow store starts as a copy of an empty migrated one (rookworld/tracking/sqlite_template.py):
the same schema and Default experiment MLflow makes, usable at once, and an existing store is never replaced."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from rookworld.tracking.sqlite_template import place_fresh_store


def tables(path: Path) -> dict[str, set[str]]:
    """Each table's and index's clauses (MLflow's own migrations write a table's constraints in varying order)."""
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'index')").fetchall()
    return {name: {line.strip().rstrip(",") for line in (sql or "").splitlines()} for name, sql in rows}


def test_a_copied_store_has_mlflows_schema_and_default_experiment_and_takes_runs(tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch):
    from mlflow import MlflowClient

    monkeypatch.chdir(tmp_path)
    migrated = tmp_path / "migrated.db"
    MlflowClient(tracking_uri=f"sqlite:///{migrated}").search_experiments(max_results=1)
    copied = tmp_path / "copied.db"
    place_fresh_store(f"sqlite:///{copied}", str(tmp_path / "templates"))
    assert tables(copied) == tables(migrated)
    client = MlflowClient(tracking_uri=f"sqlite:///{copied}")
    default = client.get_experiment("0")
    assert default.name == "Default" and default.artifact_location == str(tmp_path / "mlruns" / "0")
    run = client.create_run(client.create_experiment("e"))
    client.log_metric(run.info.run_id, "eval/score", 0.5)
    assert client.get_run(run.info.run_id).data.metrics == {"eval/score": 0.5}


def test_an_existing_store_and_a_store_without_template_are_left_to_mlflow(tmp_path: Path):
    existing = tmp_path / "existing.db"
    existing.write_bytes(b"kept")
    place_fresh_store(f"sqlite:///{existing}", str(tmp_path / "templates"))
    assert existing.read_bytes() == b"kept"
    place_fresh_store(f"sqlite:///{tmp_path / 'untouched.db'}", None)
    assert not (tmp_path / "untouched.db").exists() and not (tmp_path / "templates").exists()
