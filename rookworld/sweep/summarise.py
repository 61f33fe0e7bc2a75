"""`python -m rookworld.sweep.summarise --study NAME`: the summary of an existing Optuna study.

Every trial of the study, over all the sweep invocations that ran it: Optuna state, objective, last
step reported to the pruner, the outcome of its MLflow run, swept params, why it failed; then counts
by state and by outcome and the best trial. Run it from the directory the sweep was launched from
(the default storage and tracking URI are relative to it), or give `--storage` and `--tracking-uri`.

    python -m rookworld.sweep.summarise --study smoke
    python -m rookworld.sweep.summarise --study kl_stability --storage postgresql://host/optuna \\
        --tracking-uri http://mlflow-host:5000
    python -m rookworld.sweep.summarise --study smoke --json       # the same as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from omegaconf import OmegaConf

from rookworld.sweep.summary import fetch_study_runs, study_dict, study_markdown, summarise_study
from rookworld.tracking import TrackingError, TrackingSettings, open_store, resolve_uri

DEFAULT_STORAGE = "sqlite:///outputs/optuna/{study}.db"  # conf/sweep_storage/sqlite.yaml
TRACKING_CONFIG = Path(__file__).resolve().parents[2] / "conf" / "tracking" / "mlflow.yaml"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rookworld.sweep.summarise", description=__doc__.split("\n")[0])
    parser.add_argument("--study", required=True, help="study name (hydra.sweeper.study_name; a sweep's name)")
    parser.add_argument("--storage", help=f"Optuna storage URL or journal:PATH (default {DEFAULT_STORAGE})")
    parser.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"),
                        help="MLflow tracking URI for the outcomes (default $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)")
    parser.add_argument("--experiment", default="rookworld", help="MLflow experiment of the runs (tracking.experiment)")
    parser.add_argument("--no-mlflow", action="store_true", help="Optuna only: no outcomes")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    return parser.parse_args(argv)


def load_runs(args: argparse.Namespace, base_dir: str) -> list | None:
    """The study's MLflow runs, or None when MLflow is off or holds no such experiment."""
    if args.no_mlflow:
        return None
    tracking = OmegaConf.load(TRACKING_CONFIG).tracking
    tracking.uri, tracking.experiment = args.tracking_uri, args.experiment
    settings = TrackingSettings.from_config(tracking)
    client = open_store(replace(settings, uri=resolve_uri(settings.uri, base_dir)))
    experiment = client.get_experiment_by_name(args.experiment)
    return None if experiment is None else fetch_study_runs(client, experiment.experiment_id, args.study)


def main(argv: list[str] | None = None) -> int:
    import optuna

    from rookworld.sweep.study import open_storage, storage_file

    args = parse_args(argv)
    base_dir = os.getcwd()
    url = args.storage or DEFAULT_STORAGE.format(study=args.study)
    path = storage_file(url, base_dir)
    if path is not None and not path.exists():
        print(f"rookworld: error: no Optuna storage at {path} (run from the sweep's launch directory, or --storage)",
              file=sys.stderr)
        return 2
    try:
        study = optuna.load_study(study_name=args.study, storage=open_storage(url, base_dir))
    except KeyError:
        print(f"rookworld: error: no study {args.study!r} in {url}", file=sys.stderr)
        return 2
    try:
        runs = load_runs(args, base_dir)
    except TrackingError as error:
        print(f"rookworld: error: {error} (or --no-mlflow)", file=sys.stderr)
        return 2
    summary = summarise_study(study, runs)
    print(json.dumps(study_dict(summary), indent=2, default=str) if args.json else study_markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
