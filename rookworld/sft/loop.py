"""The supervised (behavioural-cloning) training loop of `python -m rookworld.sft` and of warm-start rounds
(rookworld/warm_start/round.py): the document stream, the loop, its evaluation and the saved model.

On several GPUs: `torchrun --standalone --nproc_per_node N -m rookworld.sft ...` (rookworld/sft/distributed.py;
sft.batch_size stays the documents per optimizer step, split over the processes).

The documents (rookworld/data/documents.py): A: documents from python-chess alone, without limit,
with a move drawn by case so rare transitions are common enough to learn; P: documents from the
annotated training positions. Held-out positions never appear in training documents. Held-out loss is measured on documents of the
held-out sets; the task evaluation is the GRPO loop's (rookworld.judge.evaluate).
"""
from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch.utils.data import DataLoader

from rookworld.run.build import eval_problems, heldout_keys, heldout_problems, load_policy
from rookworld.app.config import load_sft
from rookworld.data.documents import IGNORE, ArbiterCases, TaskDocuments, collate, heldout_batches
from rookworld.data.packing import PackedRows, batch_documents, collate_rows
from rookworld.data.positions import load_policy_problems
from rookworld.sft import distributed
from rookworld.judge.evaluate import evaluate
from rookworld.app.hooks import run_link
from rookworld.model.hub import save_pretrained
from rookworld.model.sampling import PlainDecoder
from rookworld.grpo.optim import set_lr
from rookworld.outcomes import SUCCESS
from rookworld.specs.rules import require
from rookworld.specs.sft import SftSpec
from rookworld.sft.update import check_cuda_knobs, lm_loss, supervised_step
from rookworld.tasks import Problem
from rookworld.tracking import NullTracker, make_tracker
from rookworld.model.precision import autocast_for

if TYPE_CHECKING:  # the composed config is only passed through, to the loader and the tracker
    from omegaconf import DictConfig

SAVE_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@torch.no_grad()
def heldout_loss(model, batches, device, autocast) -> float:
    model.eval()
    total, count = 0.0, 0
    for inputs, targets in batches:
        with autocast():
            loss = lm_loss(model, inputs.to(device), targets.to(device))
        n = int((targets != IGNORE).sum())
        total, count = total + loss.item() * n, count + n
    return total / max(count, 1)


def load_trainable(spec: SftSpec, device: torch.device):
    """The model to train (float32 master weights, in train mode, its packed-row attention set) and its tokenizer."""
    core, tokenizer = load_policy(spec.model, device)
    n_positions = core.config.n_positions
    require(spec.sft.seq_len <= n_positions, "sft.seq_len", spec.sft.seq_len,
            f"above the model's n_positions={n_positions}: a document (packed or not) may be seq_len tokens long, and "
            "the model has no position past n_positions")
    core.train()
    core.packed_attention = spec.sft.pack_attention
    return core, tokenizer


def training_stream(spec: SftSpec, tokenizer, policy_train: Sequence[Problem], first_stream: int,
                    exclude: set[str] | None = None):
    """The endless document stream (packed rows with sft.pack) and the collate function of its batches.
    `policy_train`: the P: positions, any sequence (a list, or a ShardPool that grows)."""
    s = spec.sft
    cases = ArbiterCases(dict(s.arbiter_cases), heldout_keys(spec.data) if exclude is None else exclude,
                         s.arbiter_docs_per_position)
    stream = TaskDocuments(tokenizer, policy_train, cases, s.arbiter_fraction, s.seq_len, spec.seed,
                           first_stream=first_stream, loss_on=s.loss_on)
    if s.pack:
        return (PackedRows(stream, s.seq_len, s.pack_window),
                partial(collate_rows, seq_len=s.seq_len, pad_id=tokenizer.pad_id))
    return stream, partial(collate, pad_id=tokenizer.pad_id)


def documents_in_item(item) -> int:
    """Documents in one item of a training stream: a document (a tuple), or a packed row (a list of them)."""
    return len(item) if isinstance(item, list) else 1


def optimizer_for(spec: SftSpec):
    return spec.optimizer.build


def step_for(spec: SftSpec, device: torch.device):
    """step(model, optimizer, batch): one supervised update as the loop makes it (autocast, clipping)."""
    autocast = partial(autocast_for, device, spec.model.dtype)
    return lambda model, optimizer, batch: supervised_step(model, optimizer, batch, autocast, spec.sft.max_grad_norm)


def run(cfg: DictConfig, policy_train: Sequence[Problem] | None = None) -> dict[str, float]:
    """The supervised run of `cfg`; `policy_train`: its P: positions (default: data.policy_train's)."""
    spec = load_sft(cfg)
    s = spec.sft
    ranks, device = distributed.start(spec.device)
    require(s.batch_size % ranks.world == 0, "sft.batch_size", s.batch_size,
            f"must split evenly over the {ranks.world} processes")
    torch.manual_seed(spec.seed)
    core, tokenizer = load_trainable(spec, device)
    check_cuda_knobs(s, device)
    model = distributed.wrap(core, ranks, device)
    model = torch.compile(model, dynamic=False) if s.compile else model
    n_params = sum(p.numel() for p in core.parameters())
    if ranks.main:
        print(f"sft: {n_params / 1e6:.1f}M parameters on {device}"
              + (f", {ranks.world} processes of {s.batch_size // ranks.world} documents a step" if ranks.world > 1 else ""),
              flush=True)
    if policy_train is None:
        policy_train = load_policy_problems("train", spec.data.as_mapping())
    policy_heldout, arbiter_heldout = heldout_problems(spec.eval.split, spec.data)
    heldout = policy_heldout + arbiter_heldout
    stream, collate_batch = training_stream(spec, tokenizer, policy_train, ranks.rank * max(s.num_workers, 1))
    loader = DataLoader(stream, batch_size=s.batch_size // ranks.world, num_workers=s.num_workers,
                        collate_fn=collate_batch,
                        persistent_workers=s.num_workers > 0, prefetch_factor=4 if s.num_workers else None)
    eval_batches = {name: heldout_batches(tokenizer, heldout, s.heldout_docs, s.batch_size, s.seq_len, loss_on)
                    for name, loss_on in (("eval/loss", "document"), ("eval/completion_loss", "completion"))}
    evaluated = eval_problems(spec.eval, policy_heldout, arbiter_heldout, seed=spec.seed)
    optimizer = spec.optimizer.build(model.parameters())
    autocast = partial(autocast_for, device, spec.model.dtype)
    reward_fn = spec.reward.build()
    max_new_tokens = dict(spec.sampling.max_new_tokens)

    def task_eval(step: int) -> dict[str, float]:
        core.eval()
        with torch.no_grad(), autocast():
            result = evaluate(PlainDecoder(core), tokenizer, evaluated, reward_fn, max_new_tokens,
                              spec.eval.batch_size, spec.eval.num_samples_logged, score=spec.eval.score)
        metrics = {**result.metrics, **{name: heldout_loss(core, batches, device, autocast)
                                        for name, batches in eval_batches.items()}}
        tracker.log_metrics(metrics, step=step)
        tracker.log_samples(result.samples, step=step)
        print(f"eval @ step {step}: " + " ".join(f"{k}={v:.3f}" for k, v in metrics.items()
                                                 if k.count("/") == 1 or k.endswith("score")), flush=True)
        core.train()
        return metrics

    def scheduled_step(step: int, elapsed_s: float) -> int:
        # With a time limit the cosine follows whichever budget runs out first, so a run stopped
        # by the clock still ends at the LR floor.
        # Warm-up counts real steps (a clock-driven schedule of many steps would otherwise skip it).
        if not s.time_limit_min or step < spec.optimizer.warmup_steps:
            return step
        return max(step, int(s.steps * elapsed_s / (60 * s.time_limit_min)))

    with (make_tracker(cfg, run_link(cfg)) if ranks.main else NullTracker()) as tracker:
        tracker.log_params(cfg)
        tracker.log_config_yaml(cfg)
        start, step, metrics, last_eval_step, documents = time.perf_counter(), 0, {}, -1, 0
        waited = 0.0  # seconds the loop waited for the document workers (the GPU starves meanwhile)
        batches = iter(loader)
        while step < s.steps:
            elapsed = distributed.rank0_value(time.perf_counter() - start, ranks)
            if s.time_limit_min and elapsed > 60 * s.time_limit_min:
                if ranks.main:
                    print(f"sft: time limit {s.time_limit_min} min reached at step {step}", flush=True)
                break
            asked = time.perf_counter()
            batch = next(batches)
            waited += time.perf_counter() - asked
            documents += batch_documents(batch) * ranks.world
            lr = spec.optimizer.lr_at(scheduled_step(step, elapsed), s.steps)
            set_lr(optimizer, lr)
            loss, grad_norm = supervised_step(model, optimizer, [t.to(device, non_blocking=True) for t in batch],
                                              autocast, s.max_grad_norm)
            step += 1
            if not ranks.main:
                continue
            if step % s.log_every == 0 or step == s.steps:
                row = {"loss": loss.item(), "grad_norm": float(grad_norm), "learning_rate": lr}
                tracker.log_metrics(row, step=step)
                elapsed = time.perf_counter() - start
                print(f"step {step}/{s.steps} | loss {row['loss']:.4f} | lr {lr:.2e} | {elapsed:.0f} s | "
                      f"{documents / elapsed:,.0f} documents/s, waited {waited / elapsed:.0%} for them", flush=True)
                if not math.isfinite(row["loss"]):
                    raise FloatingPointError(f"sft loss is {row['loss']} at step {step}")
            if s.eval_every and step % s.eval_every == 0:
                metrics, last_eval_step = task_eval(step), step
        distributed.check_in_sync(model, ranks, device)
        if not ranks.main:
            distributed.finish(ranks)
            return {}
        if last_eval_step != step:
            metrics = task_eval(step)
        metrics["sft/steps"], metrics["sft/minutes"] = step, (time.perf_counter() - start) / 60
        metrics["sft/documents"] = documents
        metrics["sft/loader_wait_fraction"] = waited / max(time.perf_counter() - start, 1e-9)
        out = Path(s.save_dir)
        save_pretrained(copy.deepcopy(core).to(SAVE_DTYPES[s.save_dtype]).eval(), tokenizer, out)
        (out / "sft_metrics.json").write_text(json.dumps(metrics, indent=1, sort_keys=True))
        tracker.log_dict(metrics, "eval_final.json")
        tracker.set_outcome(SUCCESS, f"finished {step} steps")
        print(f"sft: saved {out} after {step} steps, {metrics['sft/minutes']:.1f} min", flush=True)
    distributed.finish(ranks)
    return metrics
