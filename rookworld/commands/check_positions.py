"""`python -m rookworld.commands.check_positions`: new positions in check, one checking move away from
annotated positions, for the supervised warm start.

One child per sampled parent (rookworld/data/check_positions.py), without candidates: label them with
the annotator's --relabel, which keeps every other field:

    python -m rookworld.commands.check_positions data/selfplay/train.jsonl.gz --output check.jsonl.gz \
        --exclude rookworld/data/selfplay/{rl,validation,test}.jsonl.gz --fraction 0.3
    python -m rookworld.commands.annotate --relabel check.jsonl.gz --output check_labelled.jsonl.gz \
        --nodes 10000 --workers 16
"""

from __future__ import annotations

import random
import sys

from rookworld.commands.derived import derived_parser, write_derived
from rookworld.data.check_positions import derive


def main(argv: list[str] | None = None) -> None:
    parser = derived_parser("python -m rookworld.commands.check_positions", __doc__.split("\n\n")[0],
                            "JSONL(.gz) of the children, without candidates")
    parser.add_argument("--fraction", type=float, default=1.0, help="share of parents sampled (seeded)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the parent sample and the checking move")
    args = parser.parse_args(argv)
    if not 0 < args.fraction <= 1:
        parser.error(f"--fraction {args.fraction}: must be in (0, 1]")
    rng = random.Random(args.seed)
    n, total = write_derived(parser, args, lambda rows, exclude: derive(rows, rng, args.fraction, exclude),
                             "parent positions")
    print(f"wrote {n} positions in check to {args.output} (from {total} parents, "
          f"fraction {args.fraction:g}, seed {args.seed})", file=sys.stderr)


if __name__ == "__main__":
    main()
