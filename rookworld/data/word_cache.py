"""Cached encoding of task documents: the tokenizer's own ids, a few times faster.

The project's tokenizers are byte-level BPE whose pre-tokenizer cuts text into words first (GPT-2's
pattern; the tiny tokenizer first isolates each space that another space follows), and BPE never
merges across words. So a document's ids are its words' ids, end to end, and a chess document's words
repeat endlessly ("/", "pp", " e2e4", " -0.29", " "): each is encoded once by the tokenizer and then
looked up. Text this module cannot cut as the tokenizer does (not ASCII, a special token, another
pre-tokenizer: not handles(text)) is for the tokenizer itself.
"""
from __future__ import annotations

import json
import re
from itertools import accumulate, chain

from rookworld.model.tokenizer import EOS_TOKEN

# GPT-2's pattern for ASCII text (\p{L} = letters, \p{N} = digits), and the tiny tokenizer's, which
# first isolates each space that another space follows: on text whose only whitespace is the space,
# trying that first in the same pattern cuts the same words.
GPT2_WORDS = r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+"""
PATTERNS = {"gpt2": re.compile(GPT2_WORDS), "tiny": re.compile(" (?= )|" + GPT2_WORDS)}
BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
TINY_SPLIT = {"type": "Split", "pattern": {"Regex": " (?= )"}, "behavior": "Isolated", "invert": False}
MAX_WORDS = 1_000_000  # cached words before the cache starts again (memory stays bounded)


class WordCache:
    """encode(text): the tokenizer's ids of a text it handles(); ends(ids): each token's end in
    that text (characters, as untrimmed offsets)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer  # a tokenizers.Tokenizer
        self.pattern = PATTERNS.get(_pre_tokenizer_kind(tokenizer))
        self.words = _Words(tokenizer)
        vocab = tokenizer.get_vocab(with_added_tokens=False)
        self.token_length = {i: len(token) for token, i in vocab.items()}  # byte-level: one character a byte

    def handles(self, text: str) -> bool:
        """Printable ASCII (no whitespace but the space) without a special token, for a known pre-tokenizer."""
        return self.pattern is not None and text.isascii() and text.isprintable() and EOS_TOKEN not in text

    def encode(self, text: str) -> list[int]:
        if len(self.words) >= MAX_WORDS:
            self.words.clear()
        return list(chain.from_iterable(map(self.words.__getitem__, self.pattern.findall(text))))

    def ends(self, ids: list[int]) -> list[int]:
        return list(accumulate(map(self.token_length.__getitem__, ids)))


class _Words(dict):
    """word -> its ids, each encoded by the tokenizer the first time it is asked for."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    def __missing__(self, word: str) -> list[int]:
        ids = self[word] = self.tokenizer.encode(word, add_special_tokens=False).ids
        return ids


def _pre_tokenizer_kind(tokenizer) -> str | None:
    """"tiny" (isolated spaces, then GPT-2's words), "gpt2" (GPT-2's words alone), or None (another)."""
    config = json.loads(tokenizer.to_str())
    if config.get("normalizer") is not None or config["model"]["type"] != "BPE":
        return None
    pre = config.get("pre_tokenizer")
    if pre == BYTE_LEVEL:
        return "gpt2"
    if pre == {"type": "Sequence", "pretokenizers": [TINY_SPLIT, BYTE_LEVEL]}:
        return "tiny"
    return None
