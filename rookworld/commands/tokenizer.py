"""`python -m rookworld.commands.tokenizer [--out DIR]`: train the tiny chess BPE tokenizer, seeded and
deterministic (rookworld/model/tokenizer.py), and save it (default: the bundled one)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rookworld.model.tokenizer import TINY_TOKENIZER_DIR, train_tiny_tokenizer


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train the tiny chess BPE tokenizer.")
    parser.add_argument("--out", type=Path, default=TINY_TOKENIZER_DIR)
    parser.add_argument("--vocab-size", type=int, default=2048)
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    tokenizer = train_tiny_tokenizer(args.vocab_size, args.games, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(args.out)
    print(f"wrote {args.out / 'tokenizer.json'} (vocab {tokenizer.vocab_size})")


if __name__ == "__main__":
    main()
