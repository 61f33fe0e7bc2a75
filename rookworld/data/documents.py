"""Supervised task documents: the endless seeded stream `python -m rookworld.sft` trains on.

A RookWorld document is the end-of-text token, the task text (prompt + perfect completion) and a
newline (docs/tasks.md). A: documents come from python-chess alone: positions of random games,
with a move drawn by case (ArbiterCases); P: documents from the annotated training positions,
candidates shuffled with their evals. Held-out positions never appear in training documents.

A document travels as (token ids, first trained target): with loss_on "completion" the loss skips
the prompt's tokens (the position, and an A: prompt's move history of a random game), as TRL's
completion-only loss does; with "document" it trains on every token, as RookWorld did.

A worker's costs, cut without changing a document: token ids come from a WordCache, an A: move's
case from one legal-move probe, its truth from that case (arbiter_truth's result without parsing the
FEN again). `sft.arbiter_docs_per_position` > 1 changes the stream, not a document's distribution.
The P: positions may be any sequence (len and indexing), e.g. one that grows as shards are written.
"""
from __future__ import annotations

import random
from collections.abc import Iterator

import chess
import torch
from torch.utils.data import IterableDataset, get_worker_info

from rookworld.data.move_cases import TERMINAL_CASES, classify_position, random_game_positions
from rookworld.data.records import position_key
from rookworld.data.word_cache import WordCache
from rookworld.tasks import ArbiterTruth, Problem, arbiter_problem, history_with_move, perfect_completion
from rookworld.tasks.arbiter import REWARD_DRAW, REWARD_ILLEGAL, REWARD_LEGAL, REWARD_WIN
from rookworld.tasks.policy import render_policy_completion

IGNORE = -100  # target id the loss skips (padding)

Document = tuple[list[int], int]  # token ids, index of the first target the loss counts


class ArbiterCases:
    """Draws A: transitions case by case: a case first (by weight), then a move of that case.
    `docs_per_position` transitions are drawn from each position (each independently, given the
    position's moves by case), so each document has the distribution it has with one, for 1/k of
    the work of classifying positions (the costliest part of an A: document)."""

    def __init__(self, case_weights: dict[str, float], exclude_fens: set[str], docs_per_position: int = 1):
        self.cases = list(case_weights)
        self.weights = [case_weights[c] for c in self.cases]
        self.exclude = exclude_fens
        self.docs_per_position = docs_per_position

    def problems(self, boards: Iterator[chess.Board], rng: random.Random) -> Iterator[Problem | None]:
        """A: problems from the positions of `boards`, docs_per_position each; None for a position
        that gives none (the game is over, it is held out, or no case of the weights is possible)."""
        for board in boards:
            if board.is_game_over():
                yield None
                continue
            fen = board.fen()
            if position_key(fen) in self.exclude:
                yield None
                continue
            by_case: dict[str, list[chess.Move]] = {}
            for case, moves in classify_position(board, rng).items():
                by_case.setdefault(case.split(":")[0], []).extend(m for m, _ in moves)
            available = [(c, w) for c, w in zip(self.cases, self.weights) if by_case.get(c)]
            if not available:
                yield None
                continue
            past = [m.uci() for m in board.move_stack]
            for _ in range(self.docs_per_position):
                case = rng.choices([c for c, _ in available], [w for _, w in available])[0]
                move = rng.choice(by_case[case])
                history = tuple(history_with_move(past, move.uci()))
                yield arbiter_problem(truth_of_case(board, fen, move, case, history))


def truth_of_case(board: chess.Board, fen: str, move: chess.Move, case: str, history: tuple[str, ...]) -> ArbiterTruth:
    """arbiter_truth(fen, move, history) from the move's known case (move_cases.CASES), without
    parsing the FEN or probing the game's end again: a case names the outcome (the FEN alone has no
    repetitions to see)."""
    if case == "illegal":
        return ArbiterTruth(fen, move.uci(), history, fen, REWARD_ILLEGAL, terminated=False, truncated=True)
    board.push(move)
    next_fen = board.fen()
    board.pop()
    reward = REWARD_WIN if case == "checkmate" else REWARD_DRAW if case in TERMINAL_CASES else REWARD_LEGAL
    return ArbiterTruth(fen, move.uci(), history, next_fen, reward, terminated=case in TERMINAL_CASES,
                        truncated=False)


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
        arbiter = self.cases.problems(random_game_positions(rng, n_games=10**9), rng)
        words = WordCache(self.tokenizer.tokenizer)
        while True:
            if rng.random() < self.arbiter_fraction:
                problem = next(arbiter)
                if problem is None:
                    continue
                completion = perfect_completion(problem)
            else:
                problem = rng.choice(self.policy_problems)
                completion = render_policy_completion(problem.truth, shuffle_rng=rng)
            yield encode_document(self.tokenizer, problem.prompt_text, completion, self.seq_len, self.loss_on, words)


def encode_document(tokenizer, prompt: str, completion: str, seq_len: int, loss_on: str,
                    words: WordCache | None = None) -> Document:
    """End-of-text, prompt + completion, newline: a RookWorld training document, cut to seq_len + 1
    tokens, with the first target the loss counts: 0 for the whole document; for the completion, the
    first token that holds a character of it (a token across the boundary is trained on). `words`:
    the same ids through a WordCache (the stream's), else through the tokenizer."""
    text = prompt + completion
    if words is not None and words.handles(text):
        text_ids = words.encode(text)
        ends = words.ends(text_ids) if loss_on != "document" else []
    else:
        encoding = tokenizer.tokenizer.encode(text, add_special_tokens=False)
        text_ids, ends = encoding.ids, [end for _, end in encoding.offsets]
    ids = ([tokenizer.eos_id] + text_ids + [tokenizer.newline_id])[: seq_len + 1]
    if loss_on == "document":
        return ids, 0
    prompt_tokens = sum(1 for end in ends if end <= len(prompt))
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
