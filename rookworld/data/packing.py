"""Packed rows (`sft.pack`): task documents laid end to end in rows of seq_len tokens.

A document of n + 1 ids gives n inputs and n targets, as it does collated alone (documents.collate).
In a packed row each document's positions restart at 0 and its tokens attend only to earlier tokens
of the same document (a `segments` id per token; rookworld.model.gpt2's document attention), so each
token's loss is what it is unpacked, and the step's loss, the mean over its target tokens, too.

Rows are filled best fit from a window of pending documents, kept sorted by length: the longest that
still fits, until none does. The few tokens a row cannot fill are padding: ignored by the loss, segment -1, attending only to
padding.
"""
from __future__ import annotations

import bisect
import itertools
import math
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
    """Best-fit rows from a window of pending documents, refilled from the stream after each row."""
    order = itertools.count()
    pending = sorted(_pending(doc, next(order)) for doc in itertools.islice(documents, window))
    while True:
        row = _fill_row(pending, seq_len)
        yield row
        for doc in itertools.islice(documents, len(row)):
            bisect.insort(pending, _pending(doc, next(order)))


def pack_documents(documents: list[Document], seq_len: int) -> list[Row]:
    """A finite list of documents in the rows best fit makes, every document placed once."""
    pending, rows = sorted(_pending(doc, i) for i, doc in enumerate(documents)), []
    while pending:
        rows.append(_fill_row(pending, seq_len))
    return rows


def _pending(doc: Document, order: int) -> tuple[int, int, Document]:
    """A pending document as it is kept sorted: by its tokens, then by its arrival."""
    return document_tokens(doc), order, doc


def _fill_row(pending: list[tuple[int, int, Document]], seq_len: int) -> Row:
    """Take one row's documents out of `pending`: the longest that fits the space left (the oldest of
    that length), until none does."""
    row, space = [], seq_len
    while pending:
        longest = bisect.bisect_right(pending, (space, math.inf)) - 1
        if longest < 0:
            break
        tokens = pending[longest][0]
        _, _, doc = pending.pop(bisect.bisect_left(pending, (tokens, -1)))
        row.append(doc)
        space -= tokens
    if not row:
        raise ValueError(f"a document of {pending[0][0]} tokens does not fit a row of sft.seq_len={seq_len}")
    return row


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
