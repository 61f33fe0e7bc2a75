"""Short CPU GRPO runs printed to the last bit: each step's metrics (loss, gradient norm, learning rate,
entropy, KL, ...) as exact float reprs, the held-out eval/score, and a SHA-256 of the final weights, for a
few knob sets. Run it in two checkouts (before and after a refactor) and diff the outputs: a change that
only moves code prints the same bytes.

    PYTHONPATH=. python tools/lab/bitwise_steps.py after.txt model.path=MODEL_DIR
    (cd OTHER_CHECKOUT && PYTHONPATH=. python /path/to/tools/lab/bitwise_steps.py /tmp/before.txt model.path=MODEL_DIR)
    diff /tmp/before.txt after.txt && echo bitwise unchanged

It uses only what both checkouts have: rookworld.app.config.compose / load_run, rookworld.run.build.build_run.
The first argument is the output file; the others are overrides given to every run (model.path=DIR pins the
model both checkouts load). Wall-clock metrics (step_time, tokens_per_s) are left out.
"""
from __future__ import annotations

import hashlib
import sys

import torch

from rookworld.run.build import build_run
from rookworld.app.config import compose, load_run
from rookworld.tracking import make_tracker

BASE = ["experiment=grpo_rookworld_tiny", "device=cpu", "cpu_threads=1", "tracking=none", "seed=1", "steps=3",
        "prompts_per_step=4", "grpo.group_size=4", "eval.every=0", "eval.num_policy=8", "eval.num_arbiter=8",
        "eval.cache_dir=null", "data.arbiter_pool_size=4", "data.arbiter_pool_walks=200", "time_limit_min=null"]
CLOCK = ("step_time", "tokens_per_s", "time/")
KNOB_SETS = {
    "recipe": [],
    "dr_grpo+adaptive_kl+two_minibatches": ["grpo.loss_type=dr_grpo", "kl=adaptive", "grpo.num_minibatches=2"],
    "top_entropy+entropy_bonus+k3": ["grpo.top_entropy_quantile=0.5", "grpo.entropy.coef=0.01", "kl.estimator=k3"],
    "sgd+batch_scaled_advantages": ["optimizer=sgd", "grpo.scale_rewards=batch"],
}


class Recorder:
    """A step hook that keeps every step's metrics."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, dict[str, float]]] = []

    def should_prune(self, step, metrics, evaluation) -> bool:
        self.steps.append((step, {k: float(v) for k, v in metrics.items()}))
        return False

    def record_outcome(self, outcome: str, reason: str) -> None:
        pass


def run(name: str, overrides: list[str]) -> list[str]:
    cfg = compose([*BASE, *overrides])
    recorder = Recorder()
    trainer = build_run(load_run(cfg), make_tracker(cfg), [recorder])
    result = trainer.fit()
    lines = [f"== {name}: {result.outcome}, {result.steps} steps, objective {result.objective!r}"]
    for step, metrics in recorder.steps:
        lines.append(f"{step} " + " ".join(f"{k}={v!r}" for k, v in sorted(metrics.items()) if not k.startswith(CLOCK)))
    digest = hashlib.sha256()
    for tensor in trainer.policy.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return [*lines, f"weights sha256 {digest.hexdigest()}"]


def main() -> None:
    out, overrides = sys.argv[1], sys.argv[2:]
    torch.manual_seed(0)
    lines = [line for name, knobs in KNOB_SETS.items() for line in run(name, [*knobs, *overrides])]
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
