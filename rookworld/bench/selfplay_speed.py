"""`python -m rookworld.bench.selfplay_speed --before DIR`: self-play throughput of two source trees in one run.

Each repeat measures the tree in DIR (a checkout of earlier code, e.g. `git worktree add DIR COMMIT`)
and this one in turn, so both see the same machine load; medians are printed. Two measures:

- `--measure command` (default): the sharded self-play command (`python -m rookworld.commands.annotate
  --selfplay 1 --shards ...`, one shard of --games games): positions per core-second (positions /
  (wall seconds x workers), the figure of the command's own closing line, start-up included) and the
  CPU milliseconds per position of the command with its workers and engines. Every run's shards must
  be byte-identical to the first run's.
- `--measure loop`: one worker's game loop after start-up (the shards worker of each tree, its
  `_play` over --games games): CPU milliseconds per position in Python and in Stockfish, and wall
  milliseconds. Every run's records must equal the first run's.

Different labels exit with status 1.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rookworld.data.selfplay import SPLITS_BY_GAME
from rookworld.data.shards import shard_path

THIS_TREE = Path(__file__).resolve().parents[2]


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tree_env(tree: Path) -> dict:
    """The environment that imports rookworld from `tree`, keeping the rest of the path (packages installed aside)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))}


def annotate_command(tree: Path) -> str:
    """The annotate module of `tree`: rookworld.commands.annotate, or rookworld.data.annotate in a tree from
    before the commands left data/."""
    moved = (tree / "rookworld" / "commands" / "annotate.py").is_file()
    return "rookworld.commands.annotate" if moved else "rookworld.data.annotate"


def run_once(tree: Path, engine_path: str, folder: Path, args: argparse.Namespace) -> dict:
    """One shard of the command from `tree`: its positions, positions per core-second, CPU ms a position."""
    command = [sys.executable, "-m", annotate_command(tree), "--selfplay", "1", "--shards", str(folder),
               "--workers", str(args.workers), "--nodes", str(args.nodes), "--seed", str(args.seed),
               "--games-per-shard", str(args.games), "--engine-path", engine_path]
    cpu_before = children_cpu_seconds()
    subprocess.run(command, cwd=tree, env=tree_env(tree), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu = children_cpu_seconds() - cpu_before
    done = json.loads((folder / "done.json").read_text())
    return {"positions": done["positions"],
            "per_core_second": done["positions"] / (done["wall_seconds"] * args.workers),
            "cpu_ms_per_position": cpu / done["positions"] * 1000}


LOOP = """
import hashlib, json, os, sys, time
from rookworld.data import shards
from rookworld.data.selfplay import GameSettings
engine_kwargs, seed, games = json.loads(sys.argv[1])
shards._start_worker(engine_kwargs, seed, GameSettings())
pid = shards._worker[0].pid
def engine_cpu():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
wall, python, engine = time.perf_counter(), time.process_time(), engine_cpu()
records = [row for game in range(games) for row in shards._play(game)[0]]
wall, python, engine = time.perf_counter() - wall, time.process_time() - python, engine_cpu() - engine
print(json.dumps({"positions": len(records), "python_ms": python / len(records) * 1000,
                  "engine_ms": engine / len(records) * 1000, "wall_ms": wall / len(records) * 1000,
                  "labels": hashlib.sha256(json.dumps(records).encode()).hexdigest()}))
"""


def run_loop(tree: Path, engine_path: str, args: argparse.Namespace) -> dict:
    """One worker's game loop from `tree`: CPU ms per position in Python and in Stockfish, wall ms."""
    engine_kwargs = {"path": engine_path, "depth": None, "nodes": args.nodes, "time_limit": None, "threads": 1,
                     "hash_mb": 16, "multipv": 5, "cache_size": 100_000, "timeout": 30.0}
    out = subprocess.run([sys.executable, "-c", LOOP, json.dumps([engine_kwargs, args.seed, args.games])], cwd=tree,
                         env=tree_env(tree), check=True, capture_output=True, text=True)
    return json.loads(out.stdout.splitlines()[-1])


def figures(result: dict) -> str:
    return ", ".join(f"{key} {value:.2f}" if isinstance(value, float) else f"{key} {value}"
                     for key, value in result.items())


def shard_bytes(folder: Path) -> list[bytes]:
    return [shard_path(folder, split, 0).read_bytes() for split in SPLITS_BY_GAME]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rookworld.bench.selfplay_speed", description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="source tree of the earlier code")
    parser.add_argument("--after", type=Path, default=THIS_TREE, help="source tree of the new code (this one)")
    parser.add_argument("--measure", choices=("command", "loop"), default="command")
    parser.add_argument("--games", type=int, default=10, help="games per run (command: one shard)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--engine-path", default="/usr/games/stockfish")
    parser.add_argument("--after-engine-path", help="another Stockfish 15.1 build for the new tree (default: --engine-path)")
    args = parser.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    engines = {"before": args.engine_path, "after": args.after_engine_path or args.engine_path}
    results: dict[str, list[dict]] = {name: [] for name in trees}
    reference, same = None, True
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(args.repeats):
            for name, tree in trees.items():
                if args.measure == "loop":
                    result = run_loop(tree, engines[name], args)
                    labels = result.pop("labels")
                else:
                    folder = Path(scratch) / f"{name}-{repeat}"
                    result = run_once(tree, engines[name], folder, args)
                    labels = hashlib.sha256(b"".join(shard_bytes(folder))).hexdigest()
                results[name].append(result)
                reference = reference or labels
                same = same and labels == reference
                print(f"repeat {repeat} {name}: {figures(result)}", flush=True)
    medians = {name: {key: statistics.median(run[key] for run in runs) for key in runs[0]}
               for name, runs in results.items()}
    for name, median in medians.items():
        print(f"{name}: median {figures(median)} ({trees[name]}, {engines[name]})")
    before, after = medians["before"], medians["after"]
    if args.measure == "loop":
        ratio = (before["python_ms"] + before["engine_ms"]) / (after["python_ms"] + after["engine_ms"])
        summary = f"{ratio:.2f}x less CPU a position"
    else:
        summary = (f"{after['per_core_second'] / before['per_core_second']:.2f}x positions per core-second, "
                   f"{before['cpu_ms_per_position'] / after['cpu_ms_per_position']:.2f}x less CPU a position")
    print(f"after / before: {summary}; {args.workers if args.measure == 'command' else 1} workers, {args.games} "
          f"games of seed {args.seed} at {args.nodes} nodes, load average {os.getloadavg()[0]:.2f}; "
          f"labels {'identical' if same else 'DIFFER'}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
