"""Supervised task documents: the endless seeded stream `python -m rookworld.sft` trains on.

A RookWorld document is the end-of-text token, the task text (prompt + perfect completion) and a
newline (docs/tasks.md). A: documents come from python-chess alone: positions of random games,
with a move drawn by case (ArbiterCases); P: documents from the annotated training positions,
candidates shuffled with their evals. Held-out positions never appear in training documents.
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
    """An endless, seeded stream of token-id documents; each DataLoader worker gets its own seed.
    Streams are numbered: worker w reads stream first_stream + w (the processes of a data-parallel run
    start at rank * workers, so no two workers of a run draw the same documents)."""

    def __init__(self, tokenizer, policy_problems: list[Problem], cases: ArbiterCases,
                 arbiter_fraction: float, seq_len: int, seed: int, first_stream: int = 0):
        self.tokenizer, self.policy_problems, self.cases = tokenizer, policy_problems, cases
        self.arbiter_fraction, self.seq_len, self.seed = arbiter_fraction, seq_len, seed
        self.first_stream = first_stream

    def __iter__(self) -> Iterator[list[int]]:
        worker = get_worker_info()
        rng = random.Random(f"{self.seed}:{self.first_stream + (worker.id if worker else 0)}")
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


def heldout_batches(tokenizer, heldout: list[Problem], n_docs: int, batch_size: int, seq_len: int):
    """Fixed held-out documents: the perfect completions of the held-out problems."""
    rng = random.Random(0)
    docs = [encode_document(tokenizer, document(p, perfect_completion(p)), seq_len)
            for p in rng.sample(heldout, min(n_docs, len(heldout)))]
    return [collate(docs[i:i + batch_size], tokenizer.pad_id) for i in range(0, len(docs), batch_size)]
