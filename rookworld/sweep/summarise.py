"""`python -m rookworld.sweep summary --study NAME`: the summary of an existing Optuna study.

Every trial of the study, over all the sweep invocations that ran it: Optuna state, objective, last
step reported to the pruner, the outcome of its MLflow run, swept params, why it failed; then counts
by state and by outcome and the best trial. Run it from the directory the sweep was launched from
(the default storage and tracking URI are relative to it), or give `--storage` and `--tracking-uri`.

    python -m rookworld.sweep summary --study smoke
    python -m rookworld.sweep summary --study kl_stability --storage postgresql://host/optuna \\
        --tracking-uri http://mlflow-host:5000
    python -m rookworld.sweep summary --study smoke --json       # the same as JSON
    python -m rookworld.sweep summary --study verdict --no-mlflow --sweep verdict   # + the stage report
    python -m rookworld.sweep summary --study verdict --no-mlflow --sweep verdict --fidelity-plot fidelity.png
`--sweep NAME [--override KEY=VALUE ...]` composes that sweep config (sweeps=NAME, as it was launched) for its
stage settings and prints a staged sweep's report (docs/sweeps.md, Reading the report) as far as the study
has got; the configuration diff against the baseline is left out (it needs the launch's Hydra context).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import optuna
from omegaconf import OmegaConf

from rookworld.composition import describe
from rookworld.config import ConfigError, compose, load_stages
from rookworld.sweep.staged.stage_report import study_stage_report

from rookworld.sweep.storage.storage_url import storage_file
from rookworld.sweep.storage.study import default_storage, open_study
from rookworld.sweep.report.summary import fetch_study_runs, summarise_study, summary_dict, summary_markdown
from rookworld.tracking import TRACKING_CONFIG, TrackingError, TrackingSettings, find_experiment

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
    store = storage_file(settings.uri, base_dir) if settings.uri.startswith("sqlite:///") else None
    if store is not None and not store.exists():  # opening it would create an empty store
        raise TrackingError(f"--tracking-uri {args.tracking_uri}: no MLflow store at {store}")
    found = find_experiment(settings)
    return None if found is None else fetch_study_runs(*found, args.study)


def run(args: argparse.Namespace) -> int:
    if args.fidelity_plot and not args.sweep:
        print(f"rookworld: error: --fidelity-plot {args.fidelity_plot}: needs --sweep (the stage report it plots)",
              file=sys.stderr)
        return 2
    base_dir = os.getcwd()
    study = open_study(args.study, args.storage, base_dir)
    if isinstance(study, str):
        print(f"rookworld: error: {study}", file=sys.stderr)
        return 2
    try:
        runs = load_runs(args, base_dir)
    except TrackingError as error:
        print(f"rookworld: error: {error} (or --no-mlflow)", file=sys.stderr)
        return 2
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
            print(f"rookworld: error: --sweep {args.sweep}: {error}", file=sys.stderr)
            return 2
        except (ConfigCompositionException, OverrideParseException) as error:
            print(f"rookworld: error: {describe(error, overrides, 'config')}", file=sys.stderr)
            return 2
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

