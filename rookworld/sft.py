"""`python -m rookworld.sft`: supervised (behavioural-cloning) training on RookWorld task documents.

Documents are in the RookWorld format (tasks.md): end-of-text token, the document text, newline.
  A: documents come from python-chess alone, without limit: positions of random games (biased to
     captures, promotions and endgames) and of the bundled training positions, with a move drawn by
     case (normal, castling, en passant, promotion, checkmate, stalemate, draws, several kinds of
     illegal move), so rare transitions are common enough to learn;
  P: documents come from the annotated training positions, candidates shuffled with their evals.
Held-out positions never appear in training documents. Held-out loss is measured on documents of the
held-out sets; the task evaluation is the GRPO loop's (rookworld.evaluate).
"""
from __future__ import annotations

import copy
import json
import math
import random
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import chess
import hydra
import torch
import torch.nn.functional as F
from omegaconf import DictConfig
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from rookworld.components import eval_problems, load_policy
from rookworld.config import PROJECT_TARGETS, build, resolve_device, validate_sft
from rookworld.data.move_cases import classify_position, random_game_positions
from rookworld.data.positions import load_arbiter_problems, load_policy_problems
from rookworld.data.records import position_key
from rookworld.errors import exit_on_user_error
from rookworld.evaluate import evaluate
from rookworld.model.hub import save_pretrained
from rookworld.model.sampling import PlainDecoder
from rookworld.optim import build_optimizer, lr_at, set_lr
from rookworld.outcomes import SUCCESS
from rookworld.tasks import Problem, arbiter_problem, arbiter_truth, history_with_move, perfect_completion
from rookworld.sweep.context import trial_link
from rookworld.tasks.policy import render_policy_completion
from rookworld.tracking import make_tracker
from rookworld.trainer import autocast_for

IGNORE = -100
SAVE_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def document(problem: Problem, completion: str) -> str:
    return problem.prompt_text + completion


def policy_document(problem: Problem, rng: random.Random) -> str:
    return document(problem, render_policy_completion(problem.truth, shuffle_rng=rng))


class ArbiterCases:
    """Draws A: transitions case by case: a case first (by weight), then a move of that case."""

    def __init__(self, case_weights: dict[str, float], exclude_fens: set[str]):
        self.cases = list(case_weights)
        self.weights = [case_weights[c] for c in self.cases]
        self.exclude = exclude_fens

    def problem(self, board: chess.Board, rng: random.Random) -> Problem | None:
        if board.is_game_over() or position_key(board.fen()) in self.exclude:
            return None
        options = classify_position(board, rng)
        by_case: dict[str, list[chess.Move]] = {}
        for case, moves in options.items():
            by_case.setdefault(case.split(":")[0], []).extend(m for m, _ in moves)
        available = [(c, w) for c, w in zip(self.cases, self.weights) if by_case.get(c)]
        if not available:
            return None
        case = rng.choices([c for c, _ in available], [w for _, w in available])[0]
        move = rng.choice(by_case[case]).uci()
        history = history_with_move([m.uci() for m in board.move_stack], move)
        return arbiter_problem(arbiter_truth(board.fen(), move, history))


class TaskDocuments(IterableDataset):
    """An endless, seeded stream of token-id documents; each DataLoader worker gets its own seed."""

    def __init__(self, tokenizer, policy_problems: list[Problem], cases: ArbiterCases,
                 arbiter_fraction: float, seq_len: int, seed: int):
        self.tokenizer, self.policy_problems, self.cases = tokenizer, policy_problems, cases
        self.arbiter_fraction, self.seq_len, self.seed = arbiter_fraction, seq_len, seed

    def __iter__(self) -> Iterator[list[int]]:
        worker = get_worker_info()
        rng = random.Random(f"{self.seed}:{worker.id if worker else 0}")
        boards = random_game_positions(rng, n_games=10**9)
        while True:
            if rng.random() < self.arbiter_fraction:
                problem = self.cases.problem(next(boards), rng)
                text = None if problem is None else document(problem, perfect_completion(problem))
            else:
                text = policy_document(rng.choice(self.policy_problems), rng)
            if text is not None:
                yield self.encode(text)

    def encode(self, text: str) -> list[int]:
        return encode_document(self.tokenizer, text, self.seq_len)


def encode_document(tokenizer, text: str, seq_len: int) -> list[int]:
    """End-of-text, the text, newline: a RookWorld training document, cut to seq_len + 1 tokens."""
    return ([tokenizer.eos_id] + tokenizer.encode(text) + [tokenizer.newline_id])[: seq_len + 1]


def collate(docs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded inputs and next-token targets; padding is ignored by the loss."""
    width = max(map(len, docs)) - 1
    inputs = torch.full((len(docs), width), pad_id)
    targets = torch.full((len(docs), width), IGNORE)
    for row, ids in enumerate(docs):
        n = len(ids) - 1
        inputs[row, :n] = torch.tensor(ids[:-1])
        targets[row, :n] = torch.tensor(ids[1:])
    return inputs, targets


def lm_loss(model, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = model(inputs)
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


def heldout_batches(tokenizer, heldout: list[Problem], n_docs: int, batch_size: int, seq_len: int):
    """Fixed held-out documents: the perfect completions of the held-out problems."""
    rng = random.Random(0)
    docs = [encode_document(tokenizer, document(p, perfect_completion(p)), seq_len)
            for p in rng.sample(heldout, min(n_docs, len(heldout)))]
    return [collate(docs[i:i + batch_size], tokenizer.pad_id) for i in range(0, len(docs), batch_size)]


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
    validate_sft(cfg)
    s = cfg.sft
    device = resolve_device(cfg.device)
    torch.manual_seed(cfg.seed)
    model, tokenizer = load_policy(cfg.model, device)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"sft: {n_params / 1e6:.1f}M parameters on {device}", flush=True)
    policy_train = load_policy_problems("train", cfg.data)
    policy_heldout, arbiter_heldout = load_policy_problems("heldout", cfg.data), load_arbiter_problems("heldout", cfg.data)
    heldout = policy_heldout + arbiter_heldout
    exclude = {position_key(p.truth.fen) for p in heldout}
    cases = ArbiterCases(dict(s.arbiter_cases), exclude)
    stream = TaskDocuments(tokenizer, policy_train, cases, s.arbiter_fraction, s.seq_len, cfg.seed)
    loader = DataLoader(stream, batch_size=s.batch_size, num_workers=s.num_workers,
                        collate_fn=lambda docs: collate(docs, tokenizer.pad_id),
                        persistent_workers=s.num_workers > 0, prefetch_factor=4 if s.num_workers else None)
    eval_batches = heldout_batches(tokenizer, heldout, s.heldout_docs, s.batch_size, s.seq_len)
    evaluated = eval_problems(cfg.eval, policy_heldout, arbiter_heldout)
    optimizer = build_optimizer(model.parameters(), cfg.optimizer)
    autocast = partial(autocast_for, device, cfg.model.dtype)
    reward_fn = build(cfg.reward)
    max_new_tokens = dict(cfg.sampling.max_new_tokens)

    def task_eval(step: int) -> dict[str, float]:
        model.eval()
        with torch.no_grad(), autocast():
            result = evaluate(PlainDecoder(model), tokenizer, evaluated, reward_fn, max_new_tokens,
                              cfg.eval.batch_size, cfg.eval.num_samples_logged)
        metrics = {**result.metrics, "eval/loss": heldout_loss(model, eval_batches, device, autocast)}
        tracker.log_metrics(metrics, step=step)
        tracker.log_samples(result.samples, step=step)
        print(f"eval @ step {step}: " + " ".join(f"{k}={v:.3f}" for k, v in metrics.items()
                                                 if k.count("/") == 1 or k.endswith("score")), flush=True)
        model.train()
        return metrics

    def scheduled_step(step: int, elapsed_s: float) -> int:
        # With a time limit the cosine follows whichever budget runs out first, so a run stopped
        # by the clock still ends at the LR floor.
        if not s.time_limit_min:
            return step
        return max(step, int(s.steps * elapsed_s / (60 * s.time_limit_min)))

    with make_tracker(cfg, trial_link(cfg)) as tracker:
        tracker.log_params(cfg)
        tracker.log_config_yaml(cfg)
        start, step, metrics, last_eval_step = time.perf_counter(), 0, {}, -1
        batches = iter(loader)
        while step < s.steps:
            if s.time_limit_min and time.perf_counter() - start > 60 * s.time_limit_min:
                print(f"sft: time limit {s.time_limit_min} min reached at step {step}", flush=True)
                break
            inputs, targets = next(batches)
            lr = lr_at(scheduled_step(step, time.perf_counter() - start), cfg.optimizer.lr,
                       cfg.optimizer.warmup_steps, s.steps, cfg.optimizer.min_lr_ratio)
            set_lr(optimizer, lr)
            with autocast():
                loss = lm_loss(model, inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), s.max_grad_norm or float("inf"))
            optimizer.step()
            step += 1
            if step % s.log_every == 0 or step == s.steps:
                row = {"loss": loss.item(), "grad_norm": float(grad_norm), "learning_rate": lr}
                tracker.log_metrics(row, step=step)
                elapsed = time.perf_counter() - start
                print(f"step {step}/{s.steps} | loss {row['loss']:.4f} | lr {lr:.2e} | {elapsed:.0f} s", flush=True)
                if not math.isfinite(row["loss"]):
                    raise FloatingPointError(f"sft loss is {row['loss']} at step {step}")
            if s.eval_every and step % s.eval_every == 0:
                metrics, last_eval_step = task_eval(step), step
        if last_eval_step != step:
            metrics = task_eval(step)
        metrics["sft/steps"], metrics["sft/minutes"] = step, (time.perf_counter() - start) / 60
        out = Path(s.save_dir)
        save_pretrained(copy.deepcopy(model).to(SAVE_DTYPES[s.save_dtype]).eval(), tokenizer, out)
        (out / "sft_metrics.json").write_text(json.dumps(metrics, indent=1, sort_keys=True))
        tracker.log_dict(metrics, "eval_final.json")
        tracker.set_outcome(SUCCESS, f"finished {step} steps")
        print(f"sft: saved {out} after {step} steps, {metrics['sft/minutes']:.1f} min", flush=True)
        return metrics


@hydra.main(config_path="../conf", config_name="sft", execution_whitelist=PROJECT_TARGETS)
def main(cfg: DictConfig) -> float:
    with exit_on_user_error():
        return run(cfg)["eval/score"]


if __name__ == "__main__":
    main()
