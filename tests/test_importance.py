"""Parameter importance of a study (python -m rookworld.sweep importance) on a real Optuna journal storage."""
from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from rookworld.sweep.__main__ import main
from rookworld.sweep.importance import OUTCOME_ATTR, choice_means, successful_trials

DISTRIBUTIONS = {"optimizer.lr": FloatDistribution(1e-5, 1e-3, log=True),
                 "task_mix": CategoricalDistribution(["mixed", "env_heavy"])}


def journal_study(path) -> optuna.Study:
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(path)))
    study = optuna.create_study(study_name="demo", storage=storage, direction="maximize")
    for k in range(12):  # the objective depends on task_mix only
        mix = "env_heavy" if k % 2 else "mixed"
        study.add_trial(create_trial(params={"optimizer.lr": 1e-5 * (k + 1), "task_mix": mix},
                                     distributions=DISTRIBUTIONS, value=0.6 if k % 2 else 0.5))
    study.add_trial(create_trial(params={"optimizer.lr": 9e-4, "task_mix": "mixed"}, distributions=DISTRIBUTIONS,
                                 value=-1.0, user_attrs={OUTCOME_ATTR: "diverged:kl_growth"}))
    study.add_trial(create_trial(params={"optimizer.lr": 1e-4, "task_mix": "mixed"}, distributions=DISTRIBUTIONS,
                                 state=TrialState.PRUNED, intermediate_values={1: 0.9}, value=None))
    return study


def test_importance_ranks_the_knob_that_moves_the_objective_and_leaves_out_failures(tmp_path, capsys) -> None:
    study = journal_study(tmp_path / "demo.journal")
    assert len(successful_trials(study)) == 12  # the diverged (penalty) and the pruned trial left out
    assert choice_means(study) == {"task_mix": {"env_heavy": (6, pytest.approx(0.6)), "mixed": (6, pytest.approx(0.5))}}
    plot = tmp_path / "missing" / "folder" / "importance.png"  # its folder is created
    assert main(["importance", "--study", "demo", "--storage", f"journal:{tmp_path / 'demo.journal'}", "--plot", str(plot)]) == 0
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("| ") and "importance" not in line]
    assert rows[0].startswith("| task_mix |")  # ranked first
    assert plot.stat().st_size > 1000


def test_importance_of_a_missing_study_is_one_line(tmp_path, capsys) -> None:
    journal_study(tmp_path / "demo.journal")
    assert main(["importance", "--study", "nope", "--storage", f"journal:{tmp_path / 'demo.journal'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rookworld: error: no study 'nope'") and err.count("\n") == 1
