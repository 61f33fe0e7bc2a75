"""Commands that derive new positions from annotated ones (rookworld.commands.check_positions,
rookworld.commands.mirror): the same arguments (an input file, --output, --exclude) and the same run:
read the input, exclude its positions and those of the --exclude files, write the derived rows under a
progress bar, and refuse a missing file or a bad record, FEN or move in one line."""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Iterable, Iterator

from tqdm import tqdm

from rookworld.data.records import excluded_positions, read_jsonl, write_jsonl

Derive = Callable[[Iterable[dict], frozenset[str]], Iterator[dict]]  # (input rows, keys to skip) -> new rows


def derived_parser(prog: str, description: str, output_help: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("input", help="annotated JSONL(.gz): the parent positions (their keys are excluded too)")
    parser.add_argument("--output", required=True, help=output_help)
    parser.add_argument("--exclude", nargs="*", default=[], help="JSONL whose positions to skip (the held-out parts)")
    return parser


def write_derived(parser: argparse.ArgumentParser, args: argparse.Namespace, derive: Derive,
                  unit: str) -> tuple[int, int]:
    """Run `derive` over the input file into --output; the count written and the count of input rows."""
    try:
        records = read_jsonl(args.input)
        exclude = excluded_positions([*args.exclude, args.input])
        # the bar closes before an error line, so the error is the last line
        with tqdm(records, desc=unit, unit="pos", smoothing=0.05, file=sys.stderr) as progress:
            return write_jsonl(args.output, derive(progress, exclude)), len(records)
    except (ValueError, FileNotFoundError) as error:  # a missing file, a bad record, FEN or move: one line
        parser.exit(2, f"{parser.prog.split('.')[-1]}: error: {error}\n")
