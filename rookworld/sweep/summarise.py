"""`python -m rookworld.sweep summary --study NAME`: the summary of an existing Optuna study.

Every trial of the study over all its launches (Optuna state, objective, last step, its MLflow run's outcome,
swept params, why it failed), counts by state and outcome, the best trial; `--json` for JSON. Run it from the
sweep's launch directory (the default storage and tracking URI are relative to it), or give `--storage` and
`--tracking-uri`. `--sweep NAME [--override KEY=VALUE ...]` composes that sweep config (as it was launched) and
prints a staged sweep's report first, as far as the study has got, without the configuration diff (it needs the
launch's Hydra context); `--fidelity-plot FILE` also draws its fidelity plot.
"""

from __future__ import annotations

import argparse
import json
import os

import optuna
from omegaconf import OmegaConf

from rookworld.app.composition import describe
from rookworld.app.config import ConfigError, compose, load_stages
from rookworld.sweep.staged.stage_report import study_stage_report

from rookworld.sweep.storage.storage_url import storage_file
from rookworld.sweep.storage.study import default_storage, open_study
from rookworld.sweep.report.summary import fetch_study_runs, summarise_study, summary_dict, summary_markdown
from rookworld.tracking import SQLITE, TRACKING_CONFIG, TrackingError, TrackingSettings, find_experiment

def add_arguments(parser: argparse.ArgumentParser) -> None:
    tracking = OmegaConf.load(TRACKING_CONFIG).tracking
    parser.add_argument("--study", required=True, help="study name (hydra.sweeper.study_name; a sweep's name)")
    parser.add_argument("--storage", help=f"Optuna storage URL or journal:PATH (default {default_storage('STUDY')})")
    parser.add_argument("--tracking-uri", default=tracking.uri,
                        help="MLflow tracking URI for the outcomes (default tracking.uri of conf/tracking/mlflow.yaml:"
                             " %(default)s)")
    parser.add_argument("--experiment", default=tracking.experiment,
                        help="MLflow experiment of the runs (default tracking.experiment: %(default)s)")
    parser.add_argument("--no-mlflow", action="store_true", help="Optuna only: no outcomes")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    parser.add_argument("--sweep", help="a staged sweep's config name (sweeps=NAME): also print its stage report")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="an override the sweep was launched with (repeatable; with --sweep)")
    parser.add_argument("--fidelity-plot", metavar="FILE",
                        help="with --sweep: write the fidelity plot here once the race has scores (PNG)")


def load_runs(args: argparse.Namespace, base_dir: str) -> list | None:
    """The study's MLflow runs, or None when MLflow is off or holds no such experiment."""
    if args.no_mlflow:
        return None
    tracking = OmegaConf.load(TRACKING_CONFIG).tracking
    tracking.uri, tracking.experiment = args.tracking_uri, args.experiment
    settings = TrackingSettings.from_config(tracking, base_dir)
    store = storage_file(settings.uri, base_dir) if settings.uri.startswith(SQLITE) else None
    if store is not None and not store.exists():  # opening it would create an empty store
        raise TrackingError(f"--tracking-uri {args.tracking_uri}: no MLflow store at {store}")
    found = find_experiment(settings)
    return None if found is None else fetch_study_runs(*found, args.study)


def run(args: argparse.Namespace) -> int:
    if args.fidelity_plot and not args.sweep:
        raise ConfigError(f"--fidelity-plot {args.fidelity_plot}: needs --sweep (the stage report it plots)")
    base_dir = os.getcwd()
    study = open_study(args.study, args.storage, base_dir)
    try:
        runs = load_runs(args, base_dir)
    except TrackingError as error:
        raise ConfigError(f"{error} (or --no-mlflow)") from None
    summary = summarise_study(study, runs)
    if args.sweep is not None:  # a staged sweep's report first: it leads with the verdict
        from hydra.errors import ConfigCompositionException, OverrideParseException

        overrides = [f"sweeps={args.sweep}", *args.override]
        try:
            markdown, checks = stage_report_of(study, overrides)
            print(markdown)
            if args.fidelity_plot and checks:
                from rookworld.sweep.report.plots import fidelity_figure

                fidelity_figure(checks).savefig(args.fidelity_plot)
                print(f"fidelity plot: {args.fidelity_plot}")
        except ConfigError as error:
            raise ConfigError(f"--sweep {args.sweep}: {error}") from None
        except (ConfigCompositionException, OverrideParseException) as error:
            raise ConfigError(describe(error, overrides, "config")) from None
    print(json.dumps(summary_dict(summary), indent=2, default=str) if args.json else summary_markdown(summary))
    return 0


def stage_report_of(study: optuna.Study, overrides: list[str]) -> tuple[str, list]:
    """The stage report of `study` (markdown, fidelity checks), with the stage settings of the sweep config
    `overrides` compose."""
    config = compose(overrides)
    sweeper = config.hydra.sweeper
    if not OmegaConf.select(sweeper, "stages.enabled", default=False):
        raise ConfigError(f"hydra.sweeper.stages.enabled={OmegaConf.select(sweeper, 'stages.enabled')}: "
                          "not a staged sweep")
    stages = load_stages(sweeper.stages).with_horizon(config.steps)
    return study_stage_report(study, stages, int(sweeper.n_trials), config)

