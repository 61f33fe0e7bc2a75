"""A new user's first hour: the README's quickstart, then MLflow's REST API and UI over its store.

One store, filled the way a user fills it, in a fresh directory: the README's first command
(`python -m rookworld.train experiment=quickstart`, tracked in ./mlflow.db by default) and a small
real multirun of the tiny random model (two trials under one sweep parent run with its summary).
Then the `mlflow server` a user starts over ./mlflow.db, on a free port. The REST test reads the
quickstart run's outcome; the browser test opens the UI in headless Chromium (Debian's `chromium`
and `chromium-driver`, driven by selenium; nothing is downloaded) and checks what a user must
see: the runs table with the outcome columns, the sweep parent and its trials, a metric chart of
the quickstart run, and the sweep summary (summary.md and the PNG plots). The screenshots are the
test's artifacts: `screenshots0/` under pytest's base temporary directory (by default
/tmp/pytest-of-$USER/pytest-current/; `--basetemp DIR` puts them in DIR/screenshots0/).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_tracking import REPO, SUMMARY_FILES, mlflow_server, rest, tags_of

from rookworld.tracking.ui import EXPERIMENT_KIND_TAG, MODEL_TRAINING_KIND, VIEW_TAG, runs_view_url
from rookworld.tracking import CHANGE_TAG, OUTCOME_TAG, PARENT_TAG, ROLE_TAG, STOP_REASON_TAG, TRIAL_TAG

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]  # one worker runs the quickstart and the browser

QUICKSTART = "python -m rookworld.train experiment=quickstart"  # the README's first command
SWEEP_DIR = "multirun/tiny"  # also the sweep parent's run name
TINY_SWEEP = ["-m", "experiment=quickstart", "model=tiny", "steps=2", "eval.every=0", "eval.num_policy=2",
              "eval.num_arbiter=2", "prompts_per_step=2", "grpo.group_size=2", "sampling.max_new_tokens.P=16",
              "sampling.max_new_tokens.A=16", "optimizer.lr=1e-4,1e-2", f"hydra.sweep.dir={SWEEP_DIR}"]
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
PAGE_TIMEOUT_S = 60


def user_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "CUDA_VISIBLE_DEVICES")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


def run_in(directory: Path, args: list[str], **env: str) -> str:
    result = subprocess.run([sys.executable, *args], cwd=directory, env={**user_env(), **env}, capture_output=True,
                            text=True, timeout=1800)  # minutes on an idle machine; generous when shared
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result.stdout


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The README's first command in a fresh directory, on one thread as the README measured it:
    (the directory, its output)."""
    assert f"&& {QUICKSTART}\n" in (REPO / "README.md").read_text(), "the README's first command changed"
    directory = tmp_path_factory.mktemp("new-user")
    return directory, run_in(directory, QUICKSTART.split()[1:], OMP_NUM_THREADS="1")


@pytest.fixture(scope="module")
def user_dir(quickstart: tuple[Path, str]) -> Path:
    """A fresh directory after the quickstart and a two-trial sweep: mlflow.db, mlruns/, outputs/."""
    directory, output = quickstart
    assert "outcome: success" in output
    assert f"# Sweep {SWEEP_DIR}" in run_in(directory, ["-m", "rookworld.train", *TINY_SWEEP])
    assert sorted(p.name for p in directory.iterdir()) == ["mlflow.db", "mlruns", "multirun", "outputs"]
    return directory


@pytest.fixture(scope="module")
def server(user_dir: Path) -> Iterator[str]:
    """`mlflow server` over the user's ./mlflow.db, as docs/tracking.md starts it; yields its address."""
    with mlflow_server("sqlite:///mlflow.db", user_dir, timeout_s=120) as (base, _):
        yield base


def experiment_and_runs(base: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    experiment = rest(base, "/api/2.0/mlflow/experiments/get-by-name?experiment_name=rookworld")["experiment"]
    runs = rest(base, "/api/2.0/mlflow/runs/search", {"experiment_ids": [experiment["experiment_id"]]})["runs"]
    return experiment, runs


def test_the_quickstart_shows_learning_beyond_the_standard_error(quickstart: tuple[Path, str]) -> None:
    """Seed 0 of the README's quickstart: its last line says eval/score rose by more than the paired
    standard error of the change (seeds 1 and 2: docs/quickstart.md), the illegal moves among what rose."""
    last = quickstart[1].strip().splitlines()[-1]
    assert last.startswith("improved after 8 steps: eval/score 0.4219 -> 0.4255 (+0.0036, paired standard error "
                           "0.0030 from the changes of 256 held-out problems: 5 better, 2 worse)"), \
        quickstart[1][-3000:]
    assert "eval/A/next_state/illegal 0.749 -> 0.760" in last.split("; fell:")[0], last
    (log,) = quickstart[0].glob("outputs/*/*/train.log")  # kept: the run folder's log ends with the same line
    assert log.read_text().strip().splitlines()[-1].endswith(last), log.read_text()[-2000:]


def test_the_quickstart_run_is_served_with_outcome_success(server: str) -> None:
    experiment, runs = experiment_and_runs(server)
    quickstart = [r for r in runs if tags_of(r).get(ROLE_TAG) == "run"]
    assert len(quickstart) == 1
    run = quickstart[0]
    assert tags_of(run)[OUTCOME_TAG] == "success" and run["info"]["status"] == "FINISHED"
    assert tags_of(run)[STOP_REASON_TAG] == "finished 8 steps"
    metrics = {m["key"] for m in run["data"]["metrics"]}
    assert {"reward", "grad_norm", "eval/score", "objective", "change/eval_score", "change/stderr"} <= metrics  # no kl: kl=none
    assert tags_of(run)[CHANGE_TAG] == "improved"  # the last line's verdict, on the run
    experiment_tags = {t["key"]: t["value"] for t in experiment["tags"]}
    assert experiment_tags[EXPERIMENT_KIND_TAG] == MODEL_TRAINING_KIND and VIEW_TAG in experiment_tags


def test_an_existing_experiment_without_the_ui_tags_gets_them(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from rookworld.tracking import TrackingSettings, get_or_create_experiment

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    made_elsewhere = client.create_experiment("rookworld", tags={VIEW_TAG: "a view the user saved"})
    settings = TrackingSettings("mlflow", uri, "rookworld", None, None, 1.0, 500, 5.0, None)
    assert get_or_create_experiment(client, settings) == made_elsewhere
    tags = client.get_experiment(made_elsewhere).tags
    assert tags[EXPERIMENT_KIND_TAG] == MODEL_TRAINING_KIND
    assert tags[VIEW_TAG] == "a view the user saved"  # never overwritten


# ---------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Headless Chromium with a fresh profile (so MLflow's GenAI default applies, as for a new user)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    assert not missing, f"{missing} missing: apt-get install -y chromium chromium-driver"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tmp_path_factory.mktemp("chromium-profile")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1600,900", f"--user-data-dir={profile}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(PAGE_TIMEOUT_S)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: Any, condition: Callable[[Any], Any], what: str) -> Any:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, PAGE_TIMEOUT_S, poll_frequency=0.25).until(condition)
    except TimeoutException:
        pytest.fail(f"not shown within {PAGE_TIMEOUT_S} s: {what}; page text:\n{page_text(driver)[:3000]}")


def page_text(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.TAG_NAME, "body").text


def shows(*texts: str) -> Callable[[Any], bool]:
    return lambda driver: all(text in page_text(driver) for text in texts)


def close_assistant(driver: Any) -> None:
    """MLflow 3.17 opens its assistant panel on a first visit; a user closes it (one click)."""
    from selenium.webdriver.common.by import By

    for button in driver.find_elements(By.CSS_SELECTOR, '[data-component-id="mlflow.assistant.chat_panel.close"]'):
        button.click()


def test_a_new_user_sees_runs_outcomes_charts_and_the_sweep_summary(
    server: str, browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from selenium.webdriver.common.by import By

    shots = tmp_path_factory.mktemp("screenshots")
    print(f"screenshots: {shots}")
    experiment, runs = experiment_and_runs(server)
    by_name = {r["info"]["run_name"]: r for r in runs}
    parent = by_name[SWEEP_DIR]
    quickstart = next(r for r in runs if tags_of(r).get(ROLE_TAG) == "run")
    assert {tags_of(by_name[t]).get(PARENT_TAG) for t in ("trial_000", "trial_001")} == {parent["info"]["run_id"]}

    # The runs table, in the rookworld view: outcome, stop reason and trial columns without picking them.
    browser.get(runs_view_url(server, experiment["experiment_id"]))
    wait_for(browser, shows("Model training", "4 matching runs", SWEEP_DIR, quickstart["info"]["run_name"]),
             "the runs table with the quickstart run and the sweep parent")
    close_assistant(browser)
    for column in ("rookworld.outcome", "rookworld.stop_reason", "rookworld.trial", "objective"):
        assert browser.find_elements(By.CSS_SELECTOR, f'[data-testid="sort-header-{column}"]'), column
    # not eval/score: a diverged run's untrained step-0 score would top the column
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="sort-header-eval/score"]')
    assert "Traces overview" not in page_text(browser) and "Detect Issues" not in page_text(browser)

    # Expand the sweep parent: its two trials appear, each with its outcome and trial number.
    parent_cell = browser.find_element(By.XPATH, f"//div[@role='gridcell'][.//a[normalize-space()='{SWEEP_DIR}']]")
    parent_cell.find_element(By.TAG_NAME, "button").click()
    wait_for(browser, shows("trial_000", "trial_001"), "the sweep's child runs under the parent")
    outcome_cells = browser.find_elements(By.CSS_SELECTOR, f'[role="gridcell"][col-id="tags.`{OUTCOME_TAG}`"]')
    assert sorted(c.text for c in outcome_cells if c.text not in ("", "-")) == ["success"] * 3
    trial_cells = browser.find_elements(By.CSS_SELECTOR, f'[role="gridcell"][col-id="tags.`{TRIAL_TAG}`"]')
    assert sorted(c.text for c in trial_cells if c.text not in ("", "-")) == ["0", "1"]
    browser.save_screenshot(str(shots / "runs_table.png"))

    # A metric chart of the quickstart run: open it from the table, then Model metrics.
    browser.find_element(By.LINK_TEXT, quickstart["info"]["run_name"]).click()
    wait_for(browser, shows("Model metrics", "Artifacts"), "the quickstart run's page")
    browser.find_element(By.XPATH, "//*[@role='tab' or self::a or self::button][normalize-space()='Model metrics']").click()
    wait_for(browser, shows("reward", "Step"), "the quickstart run's metric charts")
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot"), "a metric chart")
    browser.find_element(By.CSS_SELECTOR, "input[placeholder='Search metric charts']").send_keys("reward")
    wait_for(browser, shows("(reward/A)"), "the charts of the reward metrics")
    browser.save_screenshot(str(shots / "run_metrics.png"))

    # The sweep summary on the parent run: summary.md rendered, and the plots as images.
    artifacts = f"{server}/#/experiments/{experiment['experiment_id']}/runs/{parent['info']['run_id']}/artifacts"
    browser.get(f"{artifacts}/sweep_summary/summary.md")
    wait_for(browser, shows(*sorted(SUMMARY_FILES), f"Sweep {SWEEP_DIR}", "stop reason"),
             "the sweep summary's files and the rendered summary.md")
    close_assistant(browser)
    heading = browser.find_elements(By.XPATH, f"//h1[normalize-space()='Sweep {SWEEP_DIR}']")
    assert heading, "summary.md is rendered as markdown"
    browser.save_screenshot(str(shots / "sweep_summary_md.png"))
    for plot in sorted(f for f in SUMMARY_FILES if f.endswith(".png")):
        browser.find_element(By.XPATH, f"//*[normalize-space(text())='{plot}']").click()  # in the file tree
        wait_for(browser, shows(f"sweep_summary/{plot}"), f"the artifact {plot} selected")
        wait_for(browser, lambda d: d.execute_script(
            "return [...document.images].some(i => i.complete && i.naturalWidth > 300 && !i.src.endsWith('.svg'))"), f"the image {plot}")
        browser.save_screenshot(str(shots / f"sweep_{Path(plot).stem}.png"))
