"""`python -m rookworld.sft`: supervised (behavioural-cloning) training on RookWorld task documents.
On several GPUs: `torchrun --standalone --nproc_per_node N -m rookworld.sft ...` (rookworld/distributed.py;
sft.batch_size stays the documents per optimizer step, split over the processes).

The documents (rookworld/data/documents.py): A: documents from python-chess alone, without limit,
with a move drawn by case so rare transitions are common enough to learn; P: documents from the
annotated training positions. Held-out positions never appear in training documents. Held-out loss is measured on documents of the
held-out sets; the task evaluation is the GRPO loop's (rookworld.evaluate).
"""
from __future__ import annotations

import copy
import json
import math
import time
from functools import partial
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig
from torch.utils.data import DataLoader

from rookworld.components import eval_problems, heldout_problems, load_policy
from rookworld.config import PROJECT_TARGETS, load_sft
from rookworld.data.documents import IGNORE, ArbiterCases, TaskDocuments, collate, heldout_batches
from rookworld.data.positions import load_policy_problems
from rookworld.data.records import HELD_OUT_SPLITS, position_key
from rookworld import distributed
from rookworld.composition import run_hydra_main
from rookworld.errors import as_command
from rookworld.evaluate import evaluate
from rookworld.hooks import run_link
from rookworld.model.hub import save_pretrained
from rookworld.model.sampling import PlainDecoder
from rookworld.optim import build_optimizer, lr_at, set_lr
from rookworld.outcomes import SUCCESS
from rookworld.specs.rules import require
from rookworld.supervised import lm_loss, supervised_step
from rookworld.tracking import NullTracker, make_tracker
from rookworld.model.precision import autocast_for

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


def run(cfg: DictConfig) -> dict[str, float]:
    spec = load_sft(cfg)
    s = spec.sft
    ranks, device = distributed.start(spec.device)
    require(s.batch_size % ranks.world == 0, "sft.batch_size", s.batch_size,
            f"must split evenly over the {ranks.world} processes")
    torch.manual_seed(spec.seed)
    core, tokenizer = load_policy(spec.model, device)
    core.train()
    model = distributed.wrap(core, ranks, device)
    n_params = sum(p.numel() for p in core.parameters())
    if ranks.main:
        print(f"sft: {n_params / 1e6:.1f}M parameters on {device}"
              + (f", {ranks.world} processes of {s.batch_size // ranks.world} documents a step" if ranks.world > 1 else ""),
              flush=True)
    policy_train = load_policy_problems("train", spec.data.as_mapping())
    policy_heldout, arbiter_heldout = heldout_problems(spec.eval.split, spec.data)
    heldout = policy_heldout + arbiter_heldout
    exclude = {position_key(p.truth.fen) for split in HELD_OUT_SPLITS  # neither held-out part is trained on
               for part in heldout_problems(split, spec.data) for p in part}
    cases = ArbiterCases(dict(s.arbiter_cases), exclude)
    stream = TaskDocuments(tokenizer, policy_train, cases, s.arbiter_fraction, s.seq_len, spec.seed,
                           first_stream=ranks.rank * max(s.num_workers, 1), loss_on=s.loss_on)
    loader = DataLoader(stream, batch_size=s.batch_size // ranks.world, num_workers=s.num_workers,
                        collate_fn=lambda docs: collate(docs, tokenizer.pad_id),
                        persistent_workers=s.num_workers > 0, prefetch_factor=4 if s.num_workers else None)
    eval_batches = {name: heldout_batches(tokenizer, heldout, s.heldout_docs, s.batch_size, s.seq_len, loss_on)
                    for name, loss_on in (("eval/loss", "document"), ("eval/completion_loss", "completion"))}
    evaluated = eval_problems(spec.eval, policy_heldout, arbiter_heldout, seed=spec.seed)
    optimizer = build_optimizer(model.parameters(), spec.optimizer)
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
        if not s.time_limit_min:
            return step
        return max(step, int(s.steps * elapsed_s / (60 * s.time_limit_min)))

    with (make_tracker(cfg, run_link(cfg)) if ranks.main else NullTracker()) as tracker:
        tracker.log_params(cfg)
        tracker.log_config_yaml(cfg)
        start, step, metrics, last_eval_step = time.perf_counter(), 0, {}, -1
        batches = iter(loader)
        while step < s.steps:
            elapsed = distributed.rank0_value(time.perf_counter() - start, ranks)
            if s.time_limit_min and elapsed > 60 * s.time_limit_min:
                if ranks.main:
                    print(f"sft: time limit {s.time_limit_min} min reached at step {step}", flush=True)
                break
            inputs, targets = next(batches)
            lr = lr_at(scheduled_step(step, elapsed), spec.optimizer.lr,
                       spec.optimizer.warmup_steps, s.steps, spec.optimizer.min_lr_ratio)
            set_lr(optimizer, lr)
            loss, grad_norm = supervised_step(model, optimizer, inputs.to(device, non_blocking=True),
                                              targets.to(device, non_blocking=True), autocast, s.max_grad_norm)
            step += 1
            if not ranks.main:
                continue
            if step % s.log_every == 0 or step == s.steps:
                row = {"loss": loss.item(), "grad_norm": float(grad_norm), "learning_rate": lr}
                tracker.log_metrics(row, step=step)
                elapsed = time.perf_counter() - start
                print(f"step {step}/{s.steps} | loss {row['loss']:.4f} | lr {lr:.2e} | {elapsed:.0f} s", flush=True)
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
        out = Path(s.save_dir)
        save_pretrained(copy.deepcopy(core).to(SAVE_DTYPES[s.save_dtype]).eval(), tokenizer, out)
        (out / "sft_metrics.json").write_text(json.dumps(metrics, indent=1, sort_keys=True))
        tracker.log_dict(metrics, "eval_final.json")
        tracker.set_outcome(SUCCESS, f"finished {step} steps")
        print(f"sft: saved {out} after {step} steps, {metrics['sft/minutes']:.1f} min", flush=True)
    distributed.finish(ranks)
    return metrics


@hydra.main(config_path="../conf", config_name="sft", execution_whitelist=PROJECT_TARGETS)
def main(cfg: DictConfig) -> float:
    with as_command():
        return run(cfg).get("eval/score")  # None on the other ranks of a data-parallel run


if __name__ == "__main__":
    run_hydra_main(main, "sft")
