"""How the MLflow 3 UI opens the rookworld experiment: experiment tags set when it is created.

MLflow 3.17's UI has two workflows, "GenAI" (traces overview; the default of a fresh browser) and
"Model training" (the runs table). It picks one from the browser's sidebar switch (remembered in
its local storage) or from the URL parameter `workflowType=machine_learning`; the experiment tag
`mlflow.experimentKind` = `custom_model_development` records the experiment's kind (MLflow's own
kind selector writes it; 3.17's UI reads the switch first). Columns come from a saved view: an
experiment tag `mlflow.sharedViewState.<key>` holding {name, createdAt, updatedAt, state}, where
state is the JSON of the runs table's settings. It is listed under Views, and the URL parameter
`viewStateShareKey=<key>` opens it. RUNS_VIEW_PATH is the runs table in that view.
"""

from __future__ import annotations

import json
import time

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING_KIND = "custom_model_development"
VIEW_KEY = "rookworld"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
VIEW_NAME = "rookworld: outcomes"
# The runs table's columns, as the UI names them. Not `eval/score`: a column shows a metric's last value, and a
# run that diverged before its first evaluation would show its untrained step-0 score above every success;
# `objective` is the score of a success and the failure penalty of a diverged run.
VIEW_COLUMNS = (
    "tags.`rookworld.outcome`",
    "tags.`rookworld.stop_reason`",
    "tags.`rookworld.trial`",
    "metrics.`objective`",
)
RUNS_VIEW_PATH = "#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey=" + VIEW_KEY


def experiment_ui_tags() -> dict[str, str]:
    """The tags that open the experiment on the runs table with the outcome columns."""
    now_ms = int(time.time() * 1000)
    state = json.dumps({"selectedColumns": list(VIEW_COLUMNS)})
    view = {"name": VIEW_NAME, "createdAt": now_ms, "updatedAt": now_ms, "state": state}
    return {EXPERIMENT_KIND_TAG: MODEL_TRAINING_KIND, VIEW_TAG: json.dumps(view)}


def runs_view_url(server: str, experiment_id: str) -> str:
    """The browser address of the experiment's runs table with the rookworld view, on `server`."""
    return f"{server.rstrip('/')}/{RUNS_VIEW_PATH.format(experiment_id=experiment_id)}"
