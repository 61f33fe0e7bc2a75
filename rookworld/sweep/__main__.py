"""`python -m rookworld.sweep VERB`: the commands on a sweep's study or launches, each verb's logic in its module.

    python -m rookworld.sweep summary --study NAME       the study's summary (rookworld/sweep/summarise.py)
    python -m rookworld.sweep importance --study NAME    which swept knobs moved the objective (importance.py)
    python -m rookworld.sweep timeline LAUNCH_DIR...     trials/h and idle GPU-slot time (timeline.py)
    python -m rookworld.sweep simulate                   simulated staged sweeps (rookworld/stats/simulation.py)
"""
from __future__ import annotations

import argparse
import sys

from rookworld.specs.rules import ConfigError
from rookworld.stats import simulation
from rookworld.sweep import importance, summarise, timeline

VERBS = {"summary": summarise, "importance": importance, "timeline": timeline, "simulate": simulation}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rookworld.sweep", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb, module in VERBS.items():
        doc = (module.__doc__ or "").splitlines()[0]
        module.add_arguments(verbs.add_parser(verb, help=doc, description=doc))
    args = parser.parse_args(argv)
    try:
        return VERBS[args.verb].run(args)
    except ConfigError as error:  # bad input (an argument, a study): one line, exit 2
        print(f"rookworld: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
