"""A warm-start round on the CPU, end to end (rookworld/warm_start/round.py): a tiny init continued for a
2-minute budget while 2 engine processes write new self-play shards that join its training stream; both it and
the shipped model are evaluated on the same validation problems; the model is written in files under a small
size; and the round refuses to ship, because a random init trained for a minute is worse than the shipped model."""
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import safetensors.torch
import torch

from rookworld.app.config import ASSETS_DIR, DATA_DIR
from rookworld.data.records import open_text
from rookworld.model.hub import create_tiny, load_pretrained

ROOT = Path(__file__).resolve().parents[1]
STOCKFISH = Path("/usr/games/stockfish")
PIECE_MIB = 0.25
HELD_OUT = 16  # problems of each task in each held-out part


def small_heldout(folder: Path) -> list[str]:
    """The first HELD_OUT rows of each self-play held-out file (P: rows with action values), as data overrides."""
    folder.mkdir()
    overrides = []
    for split in ("validation", "test"):
        for task, name in (("policy", f"{split}.jsonl"), ("arbiter", f"{split}_arbiter.jsonl")):
            with open_text(DATA_DIR / "selfplay" / f"{name}.xz") as source:
                rows = list(itertools.islice(source, HELD_OUT))
            (folder / name).write_text("".join(rows))
            overrides.append(f"data.{task}_{split}={folder / name}")
    return overrides


@pytest.mark.slow
@pytest.mark.skipif(not STOCKFISH.exists(), reason="needs Stockfish at /usr/games/stockfish")
def test_a_cpu_round_continues_an_init_adds_new_positions_and_refuses_a_worse_model(tmp_path):
    init = create_tiny(tmp_path / "init", seed=5)
    out = tmp_path / "round"
    shipped_before = sorted((p.name, p.stat().st_size) for p in (ASSETS_DIR / "rookworld_tiny").iterdir())
    command = [sys.executable, "-m", "rookworld.warm_start.round", "round.seed=7", "device=cpu", "model=tiny",
               f"model.path={init}", f"round.carry=[{DATA_DIR / 'bundled' / 'train.jsonl.gz'}]",
               "round.budget_min=2", "round.reserve_min=0.8", "round.engines=2", "round.nodes=2000",
               "round.games_per_shard=2", "round.measure_s=1", *small_heldout(tmp_path / "heldout"),
               f"round.exclude=[{tmp_path / 'heldout' / 'validation.jsonl'},{tmp_path / 'heldout' / 'test.jsonl'}]",
               f"round.max_shard_mib={PIECE_MIB}", "sft.batch_size=16", "sft.log_every=10", "sft.heldout_docs=16",
               "eval.num_policy=8", "eval.num_arbiter=8", "eval.batch_size=32", f"round.out={out}",
               f"hydra.run.dir={tmp_path / 'run'}"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    record = json.loads((out / "round.json").read_text())

    assert record["supervised"]["sft/steps"] > 0  # the init was continued: its weights moved
    trained, _ = load_pretrained(str(out / "model"))
    start = safetensors.torch.load_file(str(init / "model.safetensors"))["transformer.wte.weight"]
    assert not torch.equal(trained.state_dict()["wte.weight"].float(), start)

    new = sorted((out / "selfplay" / "train").glob("shard-*.jsonl.gz"))
    assert new and record["row"]["new_positions"] > 0 and record["row"]["carried_positions"] == 5597
    assert "new file(s)" in result.stdout  # a shard written during training joined the stream

    decision = record["decision"]
    assert decision["problems"] == 2 * HELD_OUT  # the same validation problems for both models
    assert set(record["validation"]) == {"candidate", "baseline"}
    assert decision["candidate"] < decision["baseline"] and not decision["ship"] and not record["ship"]
    assert "round does not ship" in result.stdout

    weights = sorted((out / "model").glob("model-*-of-*.safetensors"))
    assert len(weights) >= 2
    assert all(p.stat().st_size <= PIECE_MIB * 2**20 + 4096 for p in (out / "model").iterdir())
    assert not (out / "model" / "lineage.json").exists()  # no lineage row for a model that is not shipped
    assert sorted((p.name, p.stat().st_size) for p in (ASSETS_DIR / "rookworld_tiny").iterdir()) == shipped_before


def round_command(*overrides: str) -> list[str]:
    return [sys.executable, "-m", "rookworld.warm_start.round", *overrides]


def test_the_round_help_lists_its_own_keys_and_an_example(tmp_path):
    proc = subprocess.run(round_command("--help"), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith("rookworld.warm_start.round: one warm-start round")
    assert "python -m rookworld.warm_start.round round.seed=4" in proc.stdout
    keys = [line.split(":")[0].strip() for line in proc.stdout.splitlines() if line.startswith("  round.")]
    assert {"round.seed", "round.budget_min", "round.carry", "round.out"} <= set(keys)
    assert "  round.seed: ???" in proc.stdout and "rookworld.sft:" not in proc.stdout


def test_a_round_without_its_seed_says_it_is_required(tmp_path):
    proc = subprocess.run(round_command("device=cpu", f"hydra.run.dir={tmp_path / 'run'}"), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["rookworld: error: round.seed is required (no default): give round.seed=VALUE"]
    assert not (tmp_path / "run").exists()  # no folder for a round refused at its config


def test_a_round_says_what_it_does_before_it_loads_a_model(tmp_path):
    """Its first line comes before the measurement (a model, a document stream: a minute on a busy CPU)."""
    started = time.monotonic()
    with subprocess.Popen(round_command("round.seed=7", "device=cpu", f"round.out={tmp_path / 'out'}",
                                        f"hydra.run.dir={tmp_path / 'run'}"), cwd=ROOT, stdout=subprocess.PIPE,
                          text=True) as proc:
        first = proc.stdout.readline()
        seconds = time.monotonic() - started
        proc.terminate()
        proc.communicate(timeout=60)
    assert first == f"round: seed 7, 25 min on device=cpu, into {tmp_path / 'out'}/\n"
    assert seconds < 60  # start-up only (imports and the config): about 3 s on an idle 2-core machine
