"""A fresh sqlite MLflow store as a copy of an empty one: MLflow migrates a new database through its whole
schema history (~1.5 s of CPU on every first open); the migrated, empty database is made once per MLflow
version under `tracking.sqlite_template` and copied. The copy's Default experiment (id 0) gets the artifact
location and times MLflow would have given it on this machine now; a database that already exists is
never touched (the copy is linked into place, so a store made concurrently by another process wins)."""
from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from rookworld.tracking.settings import SQLITE


def place_fresh_store(uri: str, template_dir: str | None) -> None:
    """Before MLflow opens `uri`: a sqlite file that does not exist yet becomes a copy of the template."""
    if template_dir is None or not uri.startswith(SQLITE) or uri == SQLITE + ":memory:":
        return
    target = Path(uri[len(SQLITE):])
    if target.exists() or not target.parent.is_dir():
        return  # MLflow opens it, or names the missing folder in its own error
    handle, copy = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(handle)
    try:
        shutil.copyfile(_template(Path(template_dir)), copy)
        _as_if_created_now(Path(copy))
        os.link(copy, target)  # fails on a file that appeared meanwhile: that one stays
    except FileExistsError:
        pass
    finally:
        os.unlink(copy)


def _template(folder: Path) -> Path:
    """The migrated, empty database of this MLflow version (made here on first use)."""
    import mlflow
    from mlflow import MlflowClient

    path = folder / f"mlflow-{mlflow.__version__}.db"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        handle, made = tempfile.mkstemp(dir=folder, suffix=".db.tmp")
        os.close(handle)
        os.unlink(made)  # MLflow migrates a database that has no tables
        MlflowClient(tracking_uri=SQLITE + made).search_experiments(max_results=1)
        os.replace(made, path)
    return path


def _as_if_created_now(database: Path) -> None:
    from mlflow.store.tracking import DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH
    from mlflow.utils.uri import append_to_uri_path, resolve_uri_if_local

    location = append_to_uri_path(resolve_uri_if_local(DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH), "0")
    now_ms = int(time.time() * 1000)
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE experiments SET artifact_location = ?, creation_time = ?, last_update_time = ? "
                           "WHERE experiment_id = 0", (location, now_ms, now_ms))
    connection.close()
