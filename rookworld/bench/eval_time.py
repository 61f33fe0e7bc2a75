"""`python -m rookworld.bench.eval_time [overrides]`: how long the held-out evaluation takes.

Composes the training config, loads its model on its device and evaluates the first eval.num_policy
P: and eval.num_arbiter A: problems of the part eval.split names, as a training run's evaluation does
(greedy, eval.batch_size prompts at a time, the sampling caps). One untimed evaluation of one batch
first (CUDA graph capture, kernel compilation), then `--repeats` timed evaluations (3); prints each,
the best, seconds per 1,000 problems and the metrics (one JSON line). `--scores FILE` also writes the last
evaluation's per-problem scores (JSON: tasks, problem_scores, metrics, the overrides and the weights'
SHA-256; tools/lab/noise_table.py reads them). The untrained score the docs give for the smoke sweep is
such a file, docs/runs/smoke_sweep/untrained.json (tests/test_documented_scores.py checks it against the
shipped model and the docs):

    python -m rookworld.bench.eval_time experiment=grpo_rookworld_tiny eval.num_policy=500 eval.num_arbiter=500
    python -m rookworld.bench.eval_time --repeats 1 experiment=grpo_rookworld_tiny model.path=CHECKPOINT eval.split=test
    python -m rookworld.bench.eval_time --repeats 1 --scores s0.json experiment=grpo_rookworld_tiny model.path=CHECKPOINT
    python -m rookworld.bench.eval_time --repeats 1 --scores docs/runs/smoke_sweep/untrained.json sweeps=smoke trial=none
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from rookworld.run.build import eval_problems, heldout_problems, load_policy
from rookworld.app.composition import compose_command
from rookworld.app.config import load_run
from rookworld.app.errors import as_command
from rookworld.judge.eval_cache import weights_digest
from rookworld.judge.evaluate import EvalResult, evaluate
from rookworld.model.fast_sampling import make_decoder
from rookworld.model.precision import autocast_for
from rookworld.specs.rules import resolve_device

REPEATS = 3


def timed_evaluation(overrides: list[str], repeats: int = REPEATS) -> tuple[list[float], list, EvalResult, str, str]:
    """(seconds of each timed evaluation, the problems evaluated, the last evaluation, the device's name, the
    SHA-256 of the model's weights)."""
    spec = load_run(compose_command(overrides))
    device = resolve_device(spec.device)
    model, tokenizer = load_policy(spec.model, device)
    e = spec.eval
    problems = eval_problems(e, *heldout_problems(e.split, spec.data), seed=spec.seed)
    decoder = make_decoder(model, check_every=spec.sampling.finish_check_every)
    caps = dict(spec.sampling.max_new_tokens)
    reward_fn = spec.reward.build()

    def run(chunk: list) -> EvalResult:
        with torch.no_grad(), autocast_for(device, spec.model.dtype):
            result = evaluate(decoder, tokenizer, chunk, reward_fn, caps, e.batch_size, 0, score=e.score)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return result

    run(problems[: e.batch_size])
    seconds, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run(problems)
        seconds.append(time.perf_counter() - start)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    return seconds, problems, result, name, weights_digest(model)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rookworld.bench.eval_time", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=REPEATS, help="timed evaluations (after one untimed batch)")
    parser.add_argument("--scores", type=Path, help="write the last evaluation's per-problem scores here (JSON)")
    parser.add_argument("overrides", nargs="*", help="config overrides, as for python -m rookworld.train")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats={args.repeats}: at least one timed evaluation")
    with as_command():  # a bad override or value: one line, exit 2
        seconds, problems, result, device, digest = timed_evaluation(args.overrides, args.repeats)
    metrics, n = result.metrics, len(problems)
    if args.scores is not None:
        args.scores.write_text(json.dumps({"tasks": [p.task for p in problems], "problem_scores": result.problem_scores,
                                           "metrics": metrics, "overrides": args.overrides,
                                           "model_weights_sha256": digest}, indent=1) + "\n")
    print(f"{n} problems on {device}: " + ", ".join(f"{s:.2f} s" for s in seconds)
          + f"; best {min(seconds):.2f} s = {1000 * min(seconds) / n:.2f} s per 1,000 problems"
          + f" (eval/score {metrics['eval/score']:.3f})")
    print("metrics " + json.dumps(metrics, sort_keys=True))


if __name__ == "__main__":
    main()
