"""The same sweep command again, once its study is complete: it says so, starts no worker, makes no launch
folder, and prints the same summary as the launch that finished the study (runs joined: outcomes, best)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from sweep_helpers import subprocess_env, sweep_command


def study_summary(stdout: str) -> list[str]:
    """The printed summary's lines, from its heading on (Hydra's log lines left out)."""
    return [line for line in stdout[stdout.index("# Optuna study smoke"):].splitlines() if not line.startswith("[")]


@pytest.mark.slow
def test_a_finished_sweep_run_again_says_it_is_complete_and_prints_the_same_summary(tmp_path: Path) -> None:
    command = sweep_command("hydra.sweeper.n_trials=2", "hydra.sweeper.n_jobs=2")
    first, again = (subprocess.run(command, cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True,
                                   timeout=600) for _ in range(2))
    assert first.returncode == 0 and again.returncode == 0, (first.stderr[-3000:], again.stderr[-3000:])
    assert "is already complete: 2 trials, none to start" not in first.stdout
    outcomes = [line for line in first.stdout.splitlines() if "outcome: " in line]  # two workers' lines interleave
    assert len(outcomes) == 2 and all(re.match(r"\[trial [01]\] outcome: ", line) for line in outcomes), first.stdout
    assert "study smoke is already complete: 2 trials, none to start" in again.stdout, again.stdout
    assert study_summary(again.stdout) == study_summary(first.stdout)
    assert any("| success |" in line for line in study_summary(again.stdout)) and "Best: trial" in again.stdout
    assert len(list((tmp_path / "outputs/sweeps/smoke").iterdir())) == 1  # the first launch's folder only
