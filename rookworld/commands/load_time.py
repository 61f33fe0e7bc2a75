"""`python -m rookworld.commands.load_time`: how long the bundled data takes to load (target < 1 s).

Loads the five bundled files (P: train; P: and A: validation and test) with the in-process caches
cleared, several times, and prints each time and the best; then, separately, the start of the A:
training stream with conf/data/bundled.yaml's settings (its rare-case pools) and 1,000 draws.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from omegaconf import OmegaConf

from rookworld.data import arbiter_stream, positions

DATA_CONFIG = Path(__file__).resolve().parents[2] / "conf" / "data" / "bundled.yaml"
STREAM_DRAWS = 1000


def clear_caches() -> None:
    """The in-process caches of the data files and of the A: stream's rare-case pools, emptied."""
    positions.clear_file_caches()
    arbiter_stream.collect_pools.cache_clear()


def load_files_uncached() -> tuple[float, dict[str, int]]:
    """The bundled files, parsed into problems."""
    clear_caches()
    start = time.perf_counter()
    counts = {"P: train": len(positions.load_policy_problems("train"))}
    for split in positions.HELD_OUT_SPLITS:
        counts[f"P: {split}"] = len(positions.load_policy_problems(split))
        counts[f"A: {split}"] = len(positions.load_arbiter_problems(split))
    return time.perf_counter() - start, counts


def start_arbiter_stream_uncached() -> tuple[float, float, int]:
    """Seconds to start the A: training stream (pools collected, not read from a store), seconds for
    STREAM_DRAWS draws, draws."""
    clear_caches()
    data = OmegaConf.merge(OmegaConf.load(DATA_CONFIG), {"arbiter_pool_cache": None})
    start = time.perf_counter()
    stream = positions.load_arbiter_problems("train", data)
    started = time.perf_counter()
    draws = [stream[i] for i in range(STREAM_DRAWS)]
    return started - start, time.perf_counter() - started, len(draws)


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
    started, drawn, count = start_arbiter_stream_uncached()
    print(f"A: training stream: started in {started:.3f} s (rare-case pools), {count} draws in {drawn:.3f} s")


if __name__ == "__main__":
    main()
