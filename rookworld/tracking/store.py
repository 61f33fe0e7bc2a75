"""The MLflow store: reachability check, client, experiment lookup and creation (mlflow imported lazily)."""
from __future__ import annotations

import logging
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from rookworld.tracking.params import one_line, sanitize_key
from rookworld.tracking.settings import SQLITE, TrackingError, TrackingSettings
from rookworld.tracking.sqlite_template import place_fresh_store
from rookworld.tracking.ui import experiment_ui_tags

if TYPE_CHECKING:
    from mlflow import MlflowClient

log = logging.getLogger(__name__)


def default_artifact_location(uri: str, experiment: str) -> str | None:
    """For a sqlite store, artifacts go next to the database: `<db dir>/mlruns/<experiment>`."""
    if not uri.startswith(SQLITE):
        return None
    db_dir = Path(uri[len(SQLITE) :]).parent
    return (db_dir / "mlruns" / sanitize_key(experiment).replace("/", "_")).as_uri()


def check_reachable(uri: str, timeout_s: float) -> None:
    """Fail fast, in one line, when an http(s) tracking server does not answer."""
    if not uri.startswith(("http://", "https://")):
        return
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return  # it answered: reachable
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TrackingError(
            f"MLflow tracking server {uri} unreachable ({reason}); "
            "set tracking.uri=... or tracking=none"
        ) from exc


def open_store(settings: TrackingSettings) -> MlflowClient:
    """An MlflowClient on a store checked to be usable (a fresh sqlite DB is created here)."""
    check_reachable(settings.uri, settings.connect_timeout_s)
    try:
        from mlflow import MlflowClient
    except ModuleNotFoundError as exc:
        raise TrackingError(f"tracking.backend=mlflow needs the mlflow package ({exc}); "
                            "pip install mlflow, or tracking=none") from exc

    # A fresh sqlite store announces its table creation on stderr (INFO): noise next to rookworld's one-line messages.
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)
    try:
        place_fresh_store(settings.uri, settings.sqlite_template)
        client = MlflowClient(tracking_uri=settings.uri)
        client.search_experiments(max_results=1)
    except Exception as exc:
        log.exception("MLflow tracking store %s unusable", settings.uri)
        raise TrackingError(
            f"MLflow tracking store {settings.uri} unusable ({one_line(exc)}); "
            "set tracking.uri=... or tracking=none"
        ) from exc
    return client


def find_experiment(settings: TrackingSettings) -> tuple[MlflowClient, str] | None:
    """A client on the store and the id of `settings.experiment`, or None when the store has no such experiment."""
    client = open_store(settings)
    experiment = client.get_experiment_by_name(settings.experiment)
    return None if experiment is None else (client, experiment.experiment_id)


def get_or_create_experiment(client: MlflowClient, settings: TrackingSettings) -> str:
    """The experiment's id; it gets the UI tags (tracking/ui.py) when created or lacking them."""
    from mlflow.exceptions import MlflowException

    ui_tags = experiment_ui_tags()
    found = client.get_experiment_by_name(settings.experiment)
    if found is None:
        location = settings.artifact_location or default_artifact_location(
            settings.uri, settings.experiment
        )
        try:
            return client.create_experiment(settings.experiment, artifact_location=location, tags=ui_tags)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            log.info("experiment %s created concurrently; using it", settings.experiment)
            found = client.get_experiment_by_name(settings.experiment)
            assert found is not None
    if found.lifecycle_stage != "active":
        raise TrackingError(
            f"MLflow experiment {settings.experiment!r} is deleted; restore it "
            "(mlflow experiments restore) or set tracking.experiment=..."
        )
    for key, value in ui_tags.items():
        if key not in found.tags:  # an experiment made before these tags, or by another tool
            client.set_experiment_tag(found.experiment_id, key, value)
    return found.experiment_id
