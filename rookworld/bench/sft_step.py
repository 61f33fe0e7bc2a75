"""`python -m rookworld.bench.sft_step [--batch-sizes 192 768] [--attention sdpa,flex] [overrides]`: what one
supervised step costs, unpacked and packed, and what the document workers make.

Times the step of `python -m rookworld.sft` (rookworld/sft/update.py: forward, loss, backward, clipping,
optimizer) on the configured model and device at each batch size, on the same real documents of the
run's own stream twice: right-padded rows (sft.pack=false) and packed rows of sft.seq_len tokens
(sft.pack=true; each --attention, compiled when sft.compile), interleaved, --repeats times (medians).
Prints documents/s and real tokens/s of each (and on CUDA the share of the timed steps' wall time the GPU spent in kernels), and the stream's
documents/s in one process, with one A: document per position and with sft.arbiter_docs_per_position,
so a run's layout, batch size and worker count can be chosen from figures: the step is data-bound
when workers x stream rate falls below its documents/s.

    python -m rookworld.bench.sft_step --batch-sizes 192 384 --attention sdpa,flex experiment=sft_selfplay sft.seq_len=1024
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import time
from dataclasses import replace
from functools import partial

import torch

from rookworld.run.build import load_policy
from rookworld.app.config import compose, load_sft
from rookworld.data.documents import ArbiterCases, Document, TaskDocuments, collate
from rookworld.data.packing import collate_rows, document_tokens, pack_documents
from rookworld.data.positions import load_policy_problems
from rookworld.app.errors import as_command
from rookworld.model.precision import autocast_for
from rookworld.specs.rules import one_of, resolve_device
from rookworld.specs.sft import PACKED_ATTENTION
from rookworld.sft.update import check_cuda_knobs, supervised_step

PROFILED_STEPS = 3  # steps under torch.profiler for the GPU's busy share (CUDA only)


def stream_rate(stream: TaskDocuments, n_docs: int) -> tuple[float, list[Document]]:
    """Documents/s of one process of the stream (after its first document), and the documents it made."""
    docs = iter(stream)
    next(docs)
    start = time.perf_counter()
    made = list(itertools.islice(docs, n_docs))
    return n_docs / (time.perf_counter() - start), made


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_rate(step, batch, steps: int, device) -> float:
    """Steps/s of `step(batch)` on one fixed batch already on the device."""
    synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        step(batch)
    synchronize(device)
    return steps / (time.perf_counter() - start)


def gpu_busy(step, batch, device) -> float:
    """The share of a few steps' wall time that the GPU spends running kernels (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(PROFILED_STEPS):
            step(batch)
        synchronize(device)
        wall_us = (time.perf_counter() - start) * 1e6
    kernel_us = sum(getattr(e, "self_device_time_total", 0) for e in prof.key_averages())
    return kernel_us / wall_us


def main(argv: list[str] | None = None) -> None:
    with as_command():
        run(argv)


def run(argv: list[str] | None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[192, 384, 768],
                        help="documents per step (packed: the same documents in rows of sft.seq_len)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per layout and batch size")
    parser.add_argument("--stream-docs", type=int, default=1000, help="documents the stream's rate is timed on")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of interleaved timings (medians reported)")
    parser.add_argument("--attention", type=lambda text: text.split(","), default=None,
                        help="packed rows' attention kinds to time, comma-separated: sdpa,flex (default: sft.pack_attention)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the sft config")
    args = parser.parse_args(argv)
    spec = load_sft(compose(["tracking=none", *args.overrides], "sft"))
    s, device = spec.sft, resolve_device(spec.device)
    for kind in args.attention or []:
        one_of("--attention", kind, PACKED_ATTENTION)
    check_cuda_knobs(s, device)
    if "flex" in (args.attention or []):
        check_cuda_knobs(replace(s, pack=True, pack_attention="flex"), device)
    model, tokenizer = load_policy(spec.model, device)
    model.train()
    problems = load_policy_problems("train", spec.data.as_mapping())

    def stream(docs_per_position: int) -> TaskDocuments:
        cases = ArbiterCases(dict(s.arbiter_cases), set(), docs_per_position)
        return TaskDocuments(tokenizer, problems, cases, s.arbiter_fraction, s.seq_len, spec.seed, loss_on=s.loss_on)

    n_docs = max(args.stream_docs, *args.batch_sizes)
    per_position = sorted({1, s.arbiter_docs_per_position})
    rates = {k: [] for k in per_position}
    for _ in range(args.repeats):
        for k in per_position:
            rate, docs = stream_rate(stream(k), n_docs)
            rates[k].append(rate)
    rate = {k: statistics.median(r) for k, r in rates.items()}
    print(f"document stream: {rate[1]:,.0f} documents/s in one process, "
          f"{sum(map(document_tokens, docs)) / len(docs):.0f} tokens each (A: share {s.arbiter_fraction}, one A: "
          f"document a position" + "".join(f"; {k} a position: {rate[k]:,.0f} documents/s" for k in per_position[1:])
          + ")", flush=True)
    feed_rate = rate[s.arbiter_docs_per_position]
    optimizer = spec.optimizer.build(model.parameters())
    autocast = partial(autocast_for, device, spec.model.dtype)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    compiled = torch.compile(model, dynamic=False) if s.compile else model
    layouts = [("unpacked", model, None)] + [(f"packed {kind}" + (" compiled" if s.compile else ""), compiled, kind)
                                            for kind in args.attention or [s.pack_attention]]
    for batch_size in args.batch_sizes:
        chosen = docs[:batch_size]
        real_tokens = sum(map(document_tokens, chosen))
        unpacked = collate(chosen, tokenizer.pad_id)
        packed = collate_rows(pack_documents(chosen, s.seq_len), s.seq_len, tokenizer.pad_id)

        def step_of(runner, attention):
            def step(batch):
                if attention:
                    model.packed_attention = attention
                supervised_step(runner, optimizer, batch, autocast, s.max_grad_norm)
            return step

        runs = [(layout, step_of(runner, attention), [t.to(device) for t in (packed if attention else unpacked)])
                for layout, runner, attention in layouts]
        for _, step, batch in runs:  # untimed: compilation, the allocator
            step_rate(step, batch, 2, device)
        timed = {layout: [] for layout, _, _ in runs}
        for _ in range(args.repeats):  # the layouts interleaved
            for layout, step, batch in runs:
                timed[layout].append(step_rate(step, batch, args.steps, device))
        for layout, step, batch in runs:
            steps_s = statistics.median(timed[layout])
            busy = f", GPU busy {gpu_busy(step, batch, device):.0%}" if device.type == "cuda" else ""
            shape = "x".join(map(str, batch[0].shape))
            print(f"batch {batch_size:>5} {layout:<22} [{shape:>9}] on {name}: {steps_s:6.1f} steps/s, "
                  f"{steps_s * batch_size:9,.0f} documents/s, {steps_s * real_tokens:11,.0f} real tokens/s "
                  f"({real_tokens / batch[0].numel():.0%} of the rows){busy}; workers to feed it: "
                  f"{steps_s * batch_size / feed_rate:.1f}", flush=True)

if __name__ == "__main__":
    main()
