"""Where a GRPO step's wall time goes, host against GPU (on a GPU machine; docs/lab/performance-versions.md).

    python3 tools/lab/probes/step_split.py [--steps N] [OVERRIDE ...]   e.g. model=rookworld_tiny

Builds the bench trainer (conf/bench.yaml + overrides) and times real train_steps twice: plainly
(the step as it runs) and with each trainer method below wrapped in device syncs, so each part's
wall time = its host work + the GPU work it waits for. Inside the update, `host` is the time until
the call returns without a sync (the host's share), `+gpu` the extra time a sync then waits.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from rookworld.bench.models import load_bench_model  # noqa: E402
from rookworld.bench.steps import build_trainer  # noqa: E402
from rookworld.app.config import load_bench  # noqa: E402

CUDA = torch.cuda.is_available()
sync = torch.cuda.synchronize if CUDA else (lambda: None)
TRAINER_PARTS = ("sample_rows", "generate")
LEARNER_PARTS = ("make_batch", "update", "zero_grad", "policy_pass")


def wrap(owner, name: str, seconds: dict) -> None:
    method = getattr(owner, name)

    def timed(*args, **kwargs):
        sync()
        start = time.perf_counter()
        result = method(*args, **kwargs)
        host = time.perf_counter() - start
        sync()
        total = time.perf_counter() - start
        seconds.setdefault(name + " host", []).append(host)
        seconds.setdefault(name + " +gpu", []).append(total - host)
        return result

    setattr(owner, name, timed)


def step_times(trainer, steps: int) -> list[float]:
    times = []
    for step in range(steps):
        sync()
        start = time.perf_counter()
        trainer.train_step(step)
        sync()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = load_bench(compose("bench", overrides=["bench.random_weights=true", *args.overrides]))
    policy, tokenizer, description = load_bench_model(cfg, torch.device("cuda" if CUDA else "cpu"))
    trainer = build_trainer(cfg, policy, tokenizer, "fast")
    trainer.sync_phases = False
    print(f"{torch.cuda.get_device_name() if CUDA else 'cpu'} | {description} | {args.overrides}", flush=True)
    for step in range(3):
        trainer.train_step(step)
    plain = step_times(trainer, args.steps)
    seconds: dict[str, list[float]] = {}
    for name in TRAINER_PARTS:
        wrap(trainer, name, seconds)
    for name in LEARNER_PARTS:
        wrap(trainer.learner, name, seconds)
    wrap(trainer.learner.optimizer, "step", seconds)
    split = step_times(trainer, args.steps)
    print(f"{'part':<28}{'median ms':>10}")
    print(f"{'step, as it runs':<28}{statistics.median(plain) * 1e3:>10.2f}")
    print(f"{'step, synced apart':<28}{statistics.median(split) * 1e3:>10.2f}")
    for name, values in seconds.items():
        print(f"{name:<28}{statistics.median(values) * 1e3:>10.2f}")


if __name__ == "__main__":
    main()
