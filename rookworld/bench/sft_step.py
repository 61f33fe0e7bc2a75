"""`python -m rookworld.bench.sft_step [--batch-sizes 192 768] [overrides]`: what one supervised step costs.

Times the step of `python -m rookworld.sft` (rookworld/supervised.py: forward, loss, backward, clipping, optimizer) on the configured
model and device at each batch size, on batches of real documents from the run's own document stream,
and the stream itself in one process. Prints documents/s and tokens/s for each, so a run's batch size
and worker count can be chosen from figures: the step is data-bound when workers x stream rate falls
below the step's documents/s.

    python -m rookworld.bench.sft_step --batch-sizes 192 384 768 experiment=sft_selfplay
"""
from __future__ import annotations

import argparse
import itertools
import time
from functools import partial

import torch

from rookworld.components import load_policy
from rookworld.config import compose, load_sft
from rookworld.data.documents import ArbiterCases, Document, TaskDocuments, collate
from rookworld.data.positions import load_policy_problems
from rookworld.model.precision import autocast_for
from rookworld.optim import build_optimizer
from rookworld.specs.rules import resolve_device
from rookworld.supervised import supervised_step


def stream_rate(stream: TaskDocuments, n_docs: int) -> tuple[float, list[Document]]:
    """Documents/s of one process of the stream, and the documents it made."""
    docs = iter(stream)
    start = time.perf_counter()
    made = list(itertools.islice(docs, n_docs))
    return n_docs / (time.perf_counter() - start), made


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_rate(model, optimizer, batch, device, autocast, max_grad_norm: float, steps: int) -> float:
    """Steps/s of the supervised update (rookworld.supervised) on one fixed batch, after two untimed steps."""
    inputs, targets = (t.to(device) for t in batch)
    for _ in range(2):
        supervised_step(model, optimizer, (inputs, targets), autocast, max_grad_norm)
    synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        supervised_step(model, optimizer, (inputs, targets), autocast, max_grad_norm)
    synchronize(device)
    return steps / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[192, 384, 768])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per batch size")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the sft config")
    args = parser.parse_args(argv)
    spec = load_sft(compose(["tracking=none", *args.overrides], "sft"))
    device = resolve_device(spec.device)
    model, tokenizer = load_policy(spec.model, device)
    model.train()
    cases = ArbiterCases(dict(spec.sft.arbiter_cases), set())
    stream = TaskDocuments(tokenizer, load_policy_problems("train", spec.data.as_mapping()), cases,
                           spec.sft.arbiter_fraction, spec.sft.seq_len, spec.seed, loss_on=spec.sft.loss_on)
    rate, docs = stream_rate(stream, max(args.batch_sizes))
    tokens = sum(len(ids) for ids, _ in docs) / len(docs)
    print(f"document stream: {rate:,.0f} documents/s in one process, {tokens:.0f} tokens each "
          f"(A: share {spec.sft.arbiter_fraction})")
    optimizer = build_optimizer(model.parameters(), spec.optimizer)
    autocast = partial(autocast_for, device, spec.model.dtype)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    for batch_size in args.batch_sizes:
        steps_s = step_rate(model, optimizer, collate(docs[:batch_size], tokenizer.pad_id), device, autocast,
                            spec.sft.max_grad_norm, args.steps)
        print(f"batch {batch_size:>5} on {name}: {steps_s:6.1f} steps/s, {steps_s * batch_size:9,.0f} documents/s, "
              f"{steps_s * batch_size * tokens / 1e6:6.2f}M tokens/s; workers to feed it: "
              f"{steps_s * batch_size / rate:.1f}")


if __name__ == "__main__":
    main()
