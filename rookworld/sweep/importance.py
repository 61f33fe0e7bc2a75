"""`python -m rookworld.sweep importance --study NAME`: which swept knobs moved the objective.

Optuna's fANOVA importance (optuna.importance, seeded) over the study's successful COMPLETE trials:
a trial stopped by a divergence detector is COMPLETE with objective.failure_penalty, which would make
"diverges or not" the only signal, so it is left out (the summary counts those), as are pruned trials
(their value is a partial one). Prints the importances (they sum to 1) and, for each categorical knob,
the mean objective of each choice; `--plot FILE` also draws the importances as a bar chart.

    python -m rookworld.sweep importance --study recipe_search --plot importance.png
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections import defaultdict
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution

from rookworld.outcomes import SUCCESS
from rookworld.specs.rules import ConfigError
from rookworld.sweep.storage.study import OUTCOME_ATTR, open_study


def successful_trials(study) -> list:
    """COMPLETE trials with an objective whose run succeeded (no failure outcome recorded)."""
    return [t for t in study.get_trials(deepcopy=False)
            if t.state.name == "COMPLETE" and t.value is not None
            and t.user_attrs.get(OUTCOME_ATTR, SUCCESS) == SUCCESS]


def importances(study, seed: int = 0) -> dict[str, float]:
    """fANOVA importance of each swept param over the successful trials, largest first."""
    trials = successful_trials(study)
    if len(trials) < 2:
        raise ValueError(f"study {study.study_name}: {len(trials)} successful trials; importance needs at least 2")
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "new study created in memory" line
    successes = optuna.create_study(directions=study.directions)
    successes.add_trials(trials)
    return optuna.importance.get_param_importances(
        successes, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=seed))


def choice_means(study) -> dict[str, dict[str, tuple[int, float]]]:
    """For each categorical param: each choice's (successful trials, mean objective)."""
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for trial in successful_trials(study):
        for name, value in trial.params.items():
            if isinstance(trial.distributions[name], CategoricalDistribution):
                values[name][str(value)].append(trial.value)
    return {name: {choice: (len(v), statistics.mean(v)) for choice, v in sorted(by.items())}
            for name, by in sorted(values.items())}


def plot(importance: dict[str, float], path: str, title: str) -> None:
    # matplotlib only with --plot (its import takes about a second)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(importance)[::-1]
    fig, ax = plt.subplots(figsize=(6, 0.35 * len(names) + 1))
    ax.barh(names, [importance[n] for n in names])
    ax.set_xlabel("fANOVA importance (successful trials)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--study", required=True, help="study name (hydra.sweeper.study_name; a sweep's name)")
    parser.add_argument("--storage", help="Optuna storage URL or journal:PATH (default: the sweeps' journal file)")
    parser.add_argument("--plot", help="also write the importances as a PNG bar chart here")


def run(args: argparse.Namespace) -> int:
    if args.plot:
        folder = Path(args.plot).resolve().parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigError(f"--plot {args.plot}: cannot create its folder ({error.strerror})") from None
    study = open_study(args.study, args.storage, os.getcwd())
    try:
        importance = importances(study)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    print(f"# Parameter importance, study {study.study_name} ({len(successful_trials(study))} successful trials)\n")
    print("| param | fANOVA importance |\n|---|---|")
    print("\n".join(f"| {name} | {value:.3f} |" for name, value in importance.items()))
    for name, choices in choice_means(study).items():
        print(f"\n{name}: " + ", ".join(f"{c} {m:.4f} ({n} trials)" for c, (n, m) in choices.items()))
    if args.plot:
        plot(importance, args.plot, f"study {study.study_name}")
        print(f"\nplot: {args.plot}")
    return 0

