"""`python -m rookworld.commands.mirror`: colour-flipped copies of annotated positions, labels included.

Each copy that is new (rookworld/data/mirror.py), written to --output:

    python -m rookworld.commands.mirror data/selfplay/train.jsonl.gz --output mirrored.jsonl.gz \
        --exclude rookworld/data/selfplay/{rl,validation,test}.jsonl.gz
"""

from __future__ import annotations

import sys

from rookworld.commands.derived import derived_parser, write_derived
from rookworld.data.mirror import mirrored


def main(argv: list[str] | None = None) -> None:
    parser = derived_parser("python -m rookworld.commands.mirror", __doc__.split("\n\n")[0],
                            "JSONL(.gz) of the flipped copies")
    args = parser.parse_args(argv)
    n, total = write_derived(parser, args, mirrored, "flipped positions")
    print(f"wrote {n} flipped positions to {args.output} (from {total}; {total - n} were not new)", file=sys.stderr)


if __name__ == "__main__":
    main()
