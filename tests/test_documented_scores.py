"""The untrained score the docs give for the smoke sweep comes from one recorded command's output,
docs/runs/smoke_sweep/untrained.json (`python -m rookworld.bench.eval_time --repeats 1 --scores FILE sweeps=smoke
trial=none`: the shipped model's greedy evaluation at step 0 on the sweep's held-out problems, about a minute on
the CPU). The record must be of the shipped model (its weights' SHA-256), and every untrained score the docs
state must be the record's. A new shipped model fails the first test until the command is run again, then the
second until the docs say the new number."""
import json
import re
from pathlib import Path

import pytest

from rookworld.app.config import ASSETS_DIR
from rookworld.judge.eval_cache import weights_digest
from rookworld.model.hub import load_pretrained

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "docs" / "runs" / "smoke_sweep" / "untrained.json"
COMMAND = f"python -m rookworld.bench.eval_time --repeats 1 --scores {RECORD.relative_to(REPO)} sweeps=smoke trial=none"
STATED_IN = ("README.md", "docs/sweeps.md", "sweeps/smoke.yaml")
# "untrained ..., 0.4479" with no other digit between, and the summary's line "... untrained model (objective at
# step 0): <best> against 0.4479"
UNTRAINED = (re.compile(r"untrained\D{0,80}?(\d\.\d{3,})"),
             re.compile(r"untrained model \(objective at step 0\): \S+ against (\d\.\d{3,})"))


@pytest.fixture(scope="module")
def record() -> dict:
    return json.loads(RECORD.read_text())


def test_the_record_is_of_the_smoke_sweep_on_the_shipped_model(record):
    assert record["overrides"] == ["sweeps=smoke", "trial=none"]
    model, _ = load_pretrained(str(ASSETS_DIR / "rookworld_tiny"))
    assert weights_digest(model) == record["model_weights_sha256"], (
        f"the shipped model changed: run `{COMMAND}` and give the docs its eval/score")


@pytest.mark.parametrize("document", STATED_IN)
def test_every_untrained_score_the_docs_state_is_the_recorded_one(record, document):
    text = " ".join((REPO / document).read_text().replace("#", " ").split())  # lines (and yaml comments) joined
    stated = [number for pattern in UNTRAINED for number in pattern.findall(text)]
    assert stated, f"{document} states no untrained score"
    recorded = f"{record['metrics']['eval/score']:.4f}"
    assert set(stated) == {recorded}, f"{document} states {sorted(set(stated))}, the record ({COMMAND}) {recorded}"
