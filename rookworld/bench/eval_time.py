"""`python -m rookworld.bench.eval_time [overrides]`: how long the held-out evaluation takes.

Composes the training config, loads its model on its device and evaluates the first eval.num_policy
P: and eval.num_arbiter A: problems of the part eval.split names, as a training run's evaluation does
(greedy, eval.batch_size prompts at a time, the sampling caps). One untimed evaluation of one batch
first (CUDA graph capture, kernel compilation), then `--repeats` timed evaluations (3); prints each,
the best, seconds per 1,000 problems and the metrics (one JSON line).

    python -m rookworld.bench.eval_time experiment=grpo_rookworld_tiny eval.num_policy=500 eval.num_arbiter=500
    python -m rookworld.bench.eval_time --repeats 1 experiment=grpo_rookworld_tiny model.path=CHECKPOINT eval.split=test
"""
from __future__ import annotations

import json
import sys
import time

import torch

from rookworld.components import eval_problems, heldout_problems, load_policy
from rookworld.config import compose, load_run
from rookworld.evaluate import evaluate
from rookworld.model.fast_sampling import make_decoder
from rookworld.model.precision import autocast_for
from rookworld.specs.rules import resolve_device

REPEATS = 3


def timed_evaluation(overrides: list[str], repeats: int = REPEATS) -> tuple[list[float], int, dict[str, float], str]:
    """(seconds of each timed evaluation, problems evaluated, the metrics, the device's name)."""
    spec = load_run(compose(overrides))
    device = resolve_device(spec.device)
    model, tokenizer = load_policy(spec.model, device)
    e = spec.eval
    problems = eval_problems(e, *heldout_problems(e.split, spec.data))
    decoder = make_decoder(model, check_every=spec.sampling.finish_check_every)
    caps = dict(spec.sampling.max_new_tokens)
    reward_fn = spec.reward.build()

    def run(chunk: list) -> dict[str, float]:
        with torch.no_grad(), autocast_for(device, spec.model.dtype):
            result = evaluate(decoder, tokenizer, chunk, reward_fn, caps, e.batch_size, 0)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return result.metrics

    run(problems[: e.batch_size])
    seconds, metrics = [], {}
    for _ in range(repeats):
        start = time.perf_counter()
        metrics = run(problems)
        seconds.append(time.perf_counter() - start)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    return seconds, len(problems), metrics, name


def main(argv: list[str] | None = None) -> None:
    overrides = list(sys.argv[1:] if argv is None else argv)
    repeats = REPEATS
    if overrides[:1] == ["--repeats"]:
        repeats, overrides = int(overrides[1]), overrides[2:]
    seconds, n, metrics, device = timed_evaluation(overrides, repeats)
    print(f"{n} problems on {device}: " + ", ".join(f"{s:.2f} s" for s in seconds)
          + f"; best {min(seconds):.2f} s = {1000 * min(seconds) / n:.2f} s per 1,000 problems"
          + f" (eval/score {metrics['eval/score']:.3f})")
    print("metrics " + json.dumps(metrics, sort_keys=True))


if __name__ == "__main__":
    main()
