"""Packed rows (`sft.pack`): task documents laid end to end in rows of seq_len tokens.

A document of n + 1 ids gives n inputs and n targets, as it does collated alone (documents.collate).
In a packed row each document's positions restart at 0 and its tokens attend only to earlier tokens
of the same document (a `segments` id per token; rookworld.model.gpt2's document attention), so each
token's loss is what it is unpacked, and the step's loss, the mean over its target tokens, too.

Rows are filled best fit from a window of pending documents: the longest that still fits, until none
does. The few tokens a row cannot fill are padding: ignored by the loss, segment -1, attending only to
padding.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
from torch.utils.data import IterableDataset

from rookworld.data.documents import IGNORE, Document

PADDING_SEGMENT = -1

Row = list[Document]
PackedBatch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]  # inputs, targets, positions, segments


def document_tokens(doc: Document) -> int:
    """The positions a document takes in a row: its inputs, one fewer than its ids."""
    return len(doc[0]) - 1


class PackedRows(IterableDataset):
    """Rows of documents (each at most seq_len tokens in all) from an endless document stream; in a
    DataLoader worker the stream is that worker's own (TaskDocuments seeds by worker)."""

    def __init__(self, documents: Iterable[Document], seq_len: int, window: int):
        self.documents, self.seq_len, self.window = documents, seq_len, window

    def __iter__(self) -> Iterator[Row]:
        return pack_rows(iter(self.documents), self.seq_len, self.window)


def pack_rows(documents: Iterator[Document], seq_len: int, window: int) -> Iterator[Row]:
    """Best-fit rows from a window of pending documents, refilled from the stream as they are placed."""
    pending = [next(documents) for _ in range(window)]
    while True:
        picks = _best_fit(pending, seq_len)
        yield [pending[i] for i in picks]
        for i in picks:
            pending[i] = next(documents)


def pack_documents(documents: list[Document], seq_len: int) -> list[Row]:
    """A finite list of documents in the rows best fit makes, every document placed once."""
    pending, rows = list(documents), []
    while pending:
        picks = _best_fit(pending, seq_len)
        rows.append([pending[i] for i in picks])
        for i in sorted(picks, reverse=True):
            del pending[i]
    return rows


def _best_fit(pending: list[Document], seq_len: int) -> list[int]:
    """Indices of the documents of one row: the longest that fits the space left, until none does."""
    picks, space = [], seq_len
    while True:
        fits = [i for i, doc in enumerate(pending) if i not in picks and document_tokens(doc) <= space]
        if not fits:
            break
        pick = max(fits, key=lambda i: document_tokens(pending[i]))
        picks.append(pick)
        space -= document_tokens(pending[pick])
    if not picks:
        raise ValueError(f"a document of {min(map(document_tokens, pending))} tokens does not fit "
                         f"a row of sft.seq_len={seq_len}")
    return picks


def collate_rows(rows: list[Row], seq_len: int, pad_id: int) -> PackedBatch:
    """[R, seq_len] inputs, targets (IGNORE where untrained or padding), positions and segments."""
    inputs = torch.full((len(rows), seq_len), pad_id)
    targets = torch.full((len(rows), seq_len), IGNORE)
    positions = torch.zeros((len(rows), seq_len), dtype=torch.long)
    segments = torch.full((len(rows), seq_len), PADDING_SEGMENT)
    for r, row in enumerate(rows):
        start = 0
        for segment, (ids, first_target) in enumerate(row):
            n = len(ids) - 1
            inputs[r, start:start + n] = torch.tensor(ids[:-1])
            targets[r, start + first_target:start + n] = torch.tensor(ids[1 + first_target:])
            positions[r, start:start + n] = torch.arange(n)
            segments[r, start:start + n] = segment
            start += n
    return inputs, targets, positions, segments


def batch_documents(batch: tuple[torch.Tensor, ...]) -> int:
    """Documents in a collated batch: one a row unpacked; packed, the tokens that start a document."""
    if len(batch) == 2:
        return batch[0].shape[0]
    _, _, positions, segments = batch
    return int(((positions == 0) & (segments != PADDING_SEGMENT)).sum())
