"""ChessTokenizer: a thin wrapper over `tokenizers.Tokenizer`, plus the project's tiny tokenizer.

The tiny tokenizer is a small byte-level BPE trained on synthetic chess documents in both task
formats (P: and A:, see docs of rookworld.tasks). Rebuild it, seeded and deterministic, with

    python -m rookworld.commands.tokenizer --out rookworld/assets/tokenizer

Like GPT-2's tokenizer it keeps every padding space its own token (only the last space of a run
fuses with the next word, e.g. " M"), "\\n" is one token and `<|endoftext|>` is a special token.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import chess
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

EOS_TOKEN = "<|endoftext|>"
TINY_TOKENIZER_DIR = Path(__file__).resolve().parent.parent / "assets" / "tokenizer"


class ChessTokenizer:
    """Text <-> token ids, with the ids the sampler and the tasks need (eos, newline, pad, stops).

    `stop_ids`: end-of-text and every token whose text is only newlines. A completion is one line,
    and a GPT-2 tokenizer has tokens such as "\n\n" that end it as surely as "\n" does.
    """

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        eos_id = tokenizer.token_to_id(EOS_TOKEN)
        if eos_id is None:
            raise ValueError(f"tokenizer has no {EOS_TOKEN} token")
        newline = tokenizer.encode("\n", add_special_tokens=False).ids
        if len(newline) != 1:
            raise ValueError(f"tokenizer encodes a newline as {len(newline)} tokens, expected 1")
        self.eos_id: int = eos_id
        self.newline_id: int = newline[0]
        self.pad_id: int = eos_id
        self.stop_ids: tuple[int, ...] = (eos_id, *newline_only_ids(tokenizer))

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """encode() of each text, the batch split over the tokenizer's threads."""
        return [encoding.ids for encoding in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """By default `<|endoftext|>` decodes to nothing, so a completion stopped by eos parses cleanly."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def save(self, directory: str | Path) -> None:
        """Write `tokenizer.json` into `directory`."""
        self.tokenizer.save(str(Path(directory) / "tokenizer.json"))

    @classmethod
    def from_directory(cls, directory: str | Path) -> ChessTokenizer:
        """Read `tokenizer.json`, or GPT-2 style `vocab.json` + `merges.txt`."""
        directory = Path(directory)
        if (directory / "tokenizer.json").is_file():
            return cls(Tokenizer.from_file(str(directory / "tokenizer.json")))
        vocab, merges = directory / "vocab.json", directory / "merges.txt"
        if vocab.is_file() and merges.is_file():
            return cls(gpt2_style_tokenizer(vocab, merges))
        raise FileNotFoundError(f"no tokenizer.json or vocab.json + merges.txt in {directory}")

    @classmethod
    def tiny(cls) -> ChessTokenizer:
        """The shipped tiny chess tokenizer (rookworld/assets/tokenizer/tokenizer.json)."""
        return cls.from_directory(TINY_TOKENIZER_DIR)


def newline_only_ids(tokenizer: Tokenizer) -> list[int]:
    """Ids of the tokens whose decoded text is one or more newlines, ascending."""
    ids = range(tokenizer.get_vocab_size(with_added_tokens=True))
    texts = tokenizer.decode_batch([[i] for i in ids], skip_special_tokens=True)
    return [i for i, text in zip(ids, texts) if text and not text.strip("\n")]


def gpt2_style_tokenizer(vocab: Path, merges: Path) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE.from_file(str(vocab), str(merges)))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([EOS_TOKEN])
    return tokenizer


# ---- the tiny tokenizer: synthetic chess documents and BPE training ----


def policy_document(board: chess.Board, rng: random.Random) -> str:
    """A P: line: FEN padded to 90, up to 5 moves padded to 30, their evals padded to 40, best move."""
    moves = rng.sample([m.uci() for m in board.legal_moves], min(5, board.legal_moves.count()))
    evals = [random_eval(rng) for _ in moves]
    best = moves[max(range(len(moves)), key=lambda i: evals[i])]
    return (
        f"P: {board.fen():<90}M: {' '.join(moves):<30}"
        f"E: {' '.join(str(e) for e in evals):<40}B: {best}\n"
    )


def random_eval(rng: random.Random) -> float:
    if rng.random() < 0.03:  # mate in n is written as about +-(1000 - n/100)
        return rng.choice((1, -1)) * (1000 - rng.randint(1, 30) / 100)
    return round(rng.gauss(0.0, 2.5), rng.choice((1, 2)))


def arbiter_document(board: chess.Board, move: chess.Move, history: list[str]) -> str:
    """An A: line for playing `move` (legal or not) on `board`; `history` ends before this move."""
    previous_fen = board.fen()
    recent = " ".join((history + [move.uci()])[-10:])
    if move not in board.legal_moves:
        return f"A: {previous_fen}+{move.uci()}+{recent}+{previous_fen}+-1.0+0+1\n"
    after = board.copy(stack=False)
    after.push(move)
    outcome = after.outcome()
    reward = 0.001 if outcome is None else (0.5 if outcome.winner is None else 1.0)
    return f"A: {previous_fen}+{move.uci()}+{recent}+{after.fen()}+{reward}+{int(outcome is not None)}+0\n"


def random_illegal_move(board: chess.Board, rng: random.Random) -> chess.Move:
    while True:
        move = chess.Move(rng.randrange(64), rng.randrange(64))
        if move.from_square != move.to_square and move not in board.legal_moves:
            return move


def chess_documents(games: int, seed: int, max_plies: int = 120) -> Iterator[str]:
    """P: and A: documents from seeded random games: one of each per position."""
    rng = random.Random(seed)
    for _ in range(games):
        board, history = chess.Board(), []
        while not board.is_game_over() and len(history) < max_plies:
            yield policy_document(board, rng)
            move = rng.choice(list(board.legal_moves))
            shown = random_illegal_move(board, rng) if rng.random() < 0.05 else move
            yield arbiter_document(board, shown, history)
            board.push(move)
            history.append(move.uci())


def train_tiny_tokenizer(vocab_size: int = 2048, games: int = 200, seed: int = 0) -> ChessTokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        # GPT-2 keeps each padding space its own token; isolating every space followed by another
        # space does the same here (the last space of a run still fuses with the next word).
        pre_tokenizers.Split(Regex(" (?= )"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(chess_documents(games, seed), trainer=trainer)
    return ChessTokenizer(tokenizer)
