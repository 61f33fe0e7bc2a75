"""Supervised task documents: the endless seeded stream `python -m rookworld.sft` trains on.

A RookWorld document is the end-of-text token, the task text (prompt + perfect completion) and a
newline (docs/tasks.md). A: documents come from python-chess alone: positions of random games,
with a move drawn by case (ArbiterCases); P: documents from the annotated training positions,
candidates shuffled with their evals. Held-out positions never appear in training documents.

A document travels as (token ids, first trained target): with loss_on "completion" the loss skips
the prompt's tokens (the position, and an A: prompt's move history of a random game), as TRL's
completion-only loss does; with "document" it trains on every token, as RookWorld did.
"""
from __future__ import annotations

import random
from collections.abc import Iterator

import chess
import torch
from torch.utils.data import IterableDataset, get_worker_info

from rookworld.data.move_cases import classify_position, random_game_positions
from rookworld.data.records import position_key
from rookworld.tasks import Problem, arbiter_problem, arbiter_truth, history_with_move, perfect_completion
from rookworld.tasks.policy import render_policy_completion

IGNORE = -100  # target id the loss skips (padding)

Document = tuple[list[int], int]  # token ids, index of the first target the loss counts


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
    """An endless, seeded stream of token-id documents; each DataLoader worker gets its own seed.
    Streams are numbered: worker w reads stream first_stream + w (the processes of a data-parallel run
    start at rank * workers, so no two workers of a run draw the same documents)."""

    def __init__(self, tokenizer, policy_problems: list[Problem], cases: ArbiterCases,
                 arbiter_fraction: float, seq_len: int, seed: int, loss_on: str, first_stream: int = 0):
        self.tokenizer, self.policy_problems, self.cases = tokenizer, policy_problems, cases
        self.arbiter_fraction, self.seq_len, self.seed = arbiter_fraction, seq_len, seed
        self.first_stream, self.loss_on = first_stream, loss_on

    def __iter__(self) -> Iterator[Document]:
        worker = get_worker_info()
        rng = random.Random(f"{self.seed}:{self.first_stream + (worker.id if worker else 0)}")
        boards = random_game_positions(rng, n_games=10**9)
        while True:
            if rng.random() < self.arbiter_fraction:
                problem = self.cases.problem(next(boards), rng)
                if problem is None:
                    continue
                completion = perfect_completion(problem)
            else:
                problem = rng.choice(self.policy_problems)
                completion = render_policy_completion(problem.truth, shuffle_rng=rng)
            yield encode_document(self.tokenizer, problem.prompt_text, completion, self.seq_len, self.loss_on)


def encode_document(tokenizer, prompt: str, completion: str, seq_len: int, loss_on: str) -> Document:
    """End-of-text, prompt + completion, newline: a RookWorld training document, cut to seq_len + 1
    tokens, with the first target the loss counts: 0 for the whole document; for the completion, the
    first token that holds a character of it (a token across the boundary is trained on)."""
    encoding = tokenizer.tokenizer.encode(prompt + completion, add_special_tokens=False)
    ids = ([tokenizer.eos_id] + encoding.ids + [tokenizer.newline_id])[: seq_len + 1]
    if loss_on == "document":
        return ids, 0
    prompt_tokens = sum(1 for _, end in encoding.offsets if end <= len(prompt))
    return ids, prompt_tokens  # target i predicts ids[i + 1]: the eos predicts the first prompt token


def collate(docs: list[Document], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded inputs and next-token targets; padding and untrained prompt tokens are ignored."""
    width = max(len(ids) for ids, _ in docs) - 1
    inputs = torch.full((len(docs), width), pad_id)
    targets = torch.full((len(docs), width), IGNORE)
    for row, (ids, first_target) in enumerate(docs):
        n = len(ids) - 1
        inputs[row, :n] = torch.tensor(ids[:-1])
        targets[row, first_target:n] = torch.tensor(ids[1 + first_target:])
    return inputs, targets


def heldout_batches(tokenizer, heldout: list[Problem], n_docs: int, batch_size: int, seq_len: int,
                    loss_on: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Fixed held-out documents: the perfect completions of the held-out problems."""
    rng = random.Random(0)
    docs = [encode_document(tokenizer, p.prompt_text, perfect_completion(p), seq_len, loss_on)
            for p in rng.sample(heldout, min(n_docs, len(heldout)))]
    return [collate(docs[i:i + batch_size], tokenizer.pad_id) for i in range(0, len(docs), batch_size)]
