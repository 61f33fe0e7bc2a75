"""Can training work on rows that have stopped overlap the decode of the rows still running?
(on a GPU machine; docs/lab/performance-versions.md)

    python3 tools/lab/probes/overlap.py [--reps N] [OVERRIDE ...]

Builds the bench trainer for rookworld_tiny at the recipe's shapes (A: rows stop by 64 tokens, P:
rows run to 112) and times, each the median of N repetitions:
  gen     generation alone
  pass    the A: rows' reference log-probs + forward/backward (graphs) alone
  start   both, the A: work queued on a side stream as generation starts
  hook    both, the A: work queued when the decoder reports the last A: row finished (as a trainer
          would run it); hook_decode_high: the same with the decode on a high-priority stream
  pass_greenN, hook_greenN   the A: work on the stream of a green context of N SMs (--green-sms)
The gain of overlapping is gen + pass - (wall of both).
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
from rookworld.grpo.loss import LossNormalizer  # noqa: E402

TINY = ["model=rookworld_tiny", "bench.random_weights=false", "bench.full_length=false",
        "sampling.max_new_tokens.P=112", "sampling.max_new_tokens.A=64", "task_mix.P=0.5", "task_mix.A=0.5",
        "grpo.activation_checkpointing=false"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--green-sms", type=int, nargs="*", default=[16, 32, 64])
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = load_bench(compose("bench", overrides=[*TINY, *args.overrides]))
    device = torch.device("cuda")
    policy, tokenizer, description = load_bench_model(cfg, device)
    trainer = build_trainer(cfg, policy, tokenizer, "fast")
    trainer.sync_phases = False
    print(f"{torch.cuda.get_device_name()} | {description}", flush=True)
    for step in range(3):
        trainer.train_step(step)

    rows = trainer.sample_rows()
    rollout = trainer.generate(rows)
    batch = trainer.learner.make_batch(rollout.generation)
    batch.advantages = torch.randn(len(rows), device=device)
    a_rows = [i for i, problem in enumerate(rows) if problem.task == "A"]
    index = torch.tensor(a_rows)
    inputs, broadcast_width = batch.rows(index), batch.broadcast_width(index)
    normalizer = LossNormalizer.for_batch(cfg.run.grpo.loss_type, inputs["mask"], max(trainer.max_new_tokens.values()))
    print(f"A: rows {len(a_rows)} of {len(rows)}, completion width {inputs['mask'].shape[1]}", flush=True)

    def a_work():
        trainer.learner.logprobs("reference", inputs, broadcast_width)
        trainer.learner.policy_pass(inputs, normalizer, 0.04, broadcast_width)

    for _ in range(3):
        a_work()
    torch.cuda.synchronize()

    def timed(fn) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return time.perf_counter() - start

    def gen_only():
        trainer.generate(trainer.sample_rows())

    def queue_on(stream, fn) -> None:
        """fn's work on `stream`, after what the current stream has queued."""
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()

    def both_at_start(side):
        def run():
            problems = trainer.sample_rows()
            queue_on(side, a_work)
            trainer.generate(problems)
            torch.cuda.current_stream().wait_stream(side)
        return run

    def both_at_hook(side):
        def run():
            problems = trainer.sample_rows()
            waiting = {i for i, p in enumerate(problems) if p.task == "A"}
            launched = []

            def hook(finished, completions):
                waiting.difference_update(finished)
                if not waiting and not launched:
                    launched.append(True)
                    queue_on(side, a_work)
            trainer.generate(problems, on_finished=hook)
            torch.cuda.current_stream().wait_stream(side)
            counts.append(len(launched))
        return run

    def on_stream(stream, fn):
        def run():
            queue_on(stream, fn)
            torch.cuda.current_stream().wait_stream(stream)
        return run

    counts: list[int] = []
    normal = torch.cuda.Stream(device)
    high = torch.cuda.Stream(device, priority=-1)  # CUDA: lower is more urgent; 0 is the default
    cases = {"gen": gen_only, "pass": a_work, "start": both_at_start(normal), "hook": both_at_hook(normal),
             "hook_decode_high": on_stream(high, both_at_hook(normal))}
    # Green contexts: the A: work confined to some SMs, so the decode's kernels never wait for its blocks
    from torch.cuda import green_contexts
    print(f"green contexts supported: {green_contexts.SUPPORTED}", flush=True)
    greens = []  # a green context lives as long as its object
    for sms in args.green_sms:
        try:
            green = green_contexts.GreenContext.create(num_sms=sms, device_id=device.index or 0)
            stream = green.Stream()
            greens.append(green)
            cases[f"pass_green{sms}"] = on_stream(stream, a_work)
            cases[f"hook_green{sms}"] = both_at_hook(stream)
        except Exception as error:  # a probe: report and go on
            print(f"green context with {sms} SMs: {type(error).__name__}: {error}", flush=True)
    seconds = {name: [] for name in cases}
    for _ in range(args.reps):  # interleaved, so a drifting machine affects every case alike
        for name, fn in cases.items():
            seconds[name].append(timed(fn))
    med = {name: statistics.median(v) * 1e3 for name, v in seconds.items()}
    sequential = med["gen"] + med["pass"]
    for name, value in med.items():
        gain = "" if name.startswith(("gen", "pass")) else f"; gain over sequential {sequential - value:.2f}"
        print(f"{name:<18}{value:8.2f} ms  (min {min(seconds[name]) * 1e3:.2f}){gain}")
    print(f"sequential gen + pass {sequential:.2f} ms; the hook launched the A: work in {sum(counts)} of "
          f"{len(counts)} runs")

if __name__ == "__main__":
    main()
