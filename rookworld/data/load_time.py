"""`python -m rookworld.data.load_time`: how long the bundled data takes to load (target < 1 s).

Loads the three bundled files (P: train, P: held-out, A: held-out) with the in-process caches
cleared, several times, and prints each time and the best; then, separately, the A: training
transitions that are derived from the P: training positions (a python-chess push per position).
"""
from __future__ import annotations

import argparse
import time

from rookworld.data import positions

CACHED_LOADERS = (positions._policy_problems_cached, positions._arbiter_cases_cached,
                  positions._arbiter_train_cached)


def load_files_uncached() -> tuple[float, dict[str, int]]:
    """The bundled files, parsed into problems."""
    for cached in CACHED_LOADERS:
        cached.cache_clear()
    start = time.perf_counter()
    counts = {
        "P: train": len(positions.load_policy_problems("train")),
        "P: heldout": len(positions.load_policy_problems("heldout")),
        "A: heldout": len(positions.load_arbiter_problems("heldout")),
    }
    return time.perf_counter() - start, counts


def derive_arbiter_train_uncached() -> tuple[float, int]:
    positions._arbiter_train_cached.cache_clear()
    start = time.perf_counter()
    count = len(positions.load_arbiter_problems("train"))
    return time.perf_counter() - start, count


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="uncached loads to time")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats {args.repeats}: must be >= 1")
    times = []
    for _ in range(args.repeats):
        elapsed, counts = load_files_uncached()
        times.append(elapsed)
        print(f"bundled files {counts} loaded in {elapsed:.3f} s")
    verdict = "OK" if min(times) < 1.0 else "over the 1 s target"
    print(f"bundled files, best of {args.repeats}: {min(times):.3f} s ({verdict})")
    elapsed, count = derive_arbiter_train_uncached()
    print(f"A: training transitions derived from the P: training positions: {count} in {elapsed:.3f} s")


if __name__ == "__main__":
    main()
