"""Action values: the engine value of every legal move of a position, over a pool of engine processes,
written in resumable blocks.

Each record of an annotated P: JSONL file is written unchanged plus

    "action_values": [["e2e4", 0.31], ["d2d4", 0.29], ...]   every legal move once, best first (ties: by UCI)
    "action_values_limit": {"nodes": N}                      the node budget of each move's search

A move's value is what a root search restricted to that move (Stockfish's `searchmoves`) reports at
N nodes, one thread, from a cleared hash (`ucinewgame` before each move): pawns from the side to
move's point of view, mate in n = +-(1000 - n/100) as in the candidates. One search per move, each
from a clean state, so a value does not depend on the other moves, the order or the process.

A run folder holds run.json and done.json (run_folder.py) and

    blocks/block-NNNNN.jsonl.gz      the records of input positions [N*K, (N+1)*K) (K = positions per block)

The parent takes the positions back in input order and writes a block once all its positions are
back, then done.json; a killed run resumes after its last complete block, and the output (the blocks
joined) is byte for byte that of an unkilled run, whatever the number of workers.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Iterable, Iterator

import chess
from tqdm import tqdm

from rookworld.data.records import at_line, iter_jsonl
from rookworld.data.run_folder import (check_run_settings, completed, engine_pool, in_order, join_parts, write_done,
                                       write_part)
from rookworld.stockfish.engine import Engine

FRESH = {"blocks": 0, "positions": 0, "moves": 0, "engine_seconds": 0.0, "wall_seconds": 0.0}
WINDOW_PER_WORKER = 4  # positions in flight per worker: enough to hide the slowest position of a block


def action_values(engine: Engine, fen: str) -> list[list]:
    """[[uci, pawns], ...] of every legal move, best first (ties: by UCI); [] without a legal move."""
    board = chess.Board(fen)
    values = [(move.uci(), engine.evaluate_move(fen, move.uci())) for move in board.legal_moves]
    return [[move, value] for move, value in sorted(values, key=lambda pair: (-pair[1], pair[0]))]


def block_path(folder: Path, block: int) -> Path:
    return folder / "blocks" / f"block-{block:05d}.jsonl.gz"


def read_positions(path: str | Path) -> list[dict]:
    """The records of an annotated JSONL file; a line without a valid "fen" raises naming path:line."""
    records = []
    for line_no, record in iter_jsonl(path):
        with at_line(path, line_no):
            chess.Board(record["fen"])
        records.append(record)
    return records


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# -- the worker side ---------------------------------------------------------------------------------

_worker_engine: Engine | None = None


def _start_worker(engine_kwargs: dict) -> None:
    global _worker_engine
    _worker_engine = Engine(**engine_kwargs)
    _worker_engine.start()  # engine start-up is not part of the first position


def _values_of(fen: str) -> tuple[list[list], float]:
    """(action values, engine seconds) of one position."""
    assert _worker_engine is not None
    started = time.perf_counter()
    values = action_values(_worker_engine, fen)
    return values, time.perf_counter() - started


def values_in_order(fens: Iterable[str], workers: int, engine_kwargs: dict) -> Iterator[tuple[list[list], float]]:
    """(action values, engine seconds) of each FEN in input order, from `workers` processes with one
    Engine(**engine_kwargs) each."""
    with engine_pool(workers, _start_worker, (engine_kwargs,)) as pool:
        for _, result in in_order(pool, _values_of, fens, WINDOW_PER_WORKER * workers):
            yield result


# -- the parent side ---------------------------------------------------------------------------------


def run_action_values(source: str | Path, output: str | Path, folder: str | Path, *, nodes: int, workers: int,
                      positions_per_block: int, engine_kwargs: dict) -> dict:
    """Every record of `source` plus its action values, written to `output` (resuming a killed run in
    `folder`); returns done.json's figures. `engine_kwargs` are Engine's besides the limit and threads."""
    folder = Path(folder)
    records = read_positions(source)
    engine = {**engine_kwargs, "nodes": nodes, "depth": None, "time_limit": None, "threads": 1, "cache_size": 0}
    with Engine(**engine) as probe:
        engine_name = probe.name  # a resume with another Stockfish would mix its values with these
    check_run_settings(folder, {"input_sha256": file_sha256(source), "positions": len(records),
                                "positions_per_block": positions_per_block, "engine_name": engine_name,
                                "engine": {key: engine[key] for key in ("nodes", "threads", "hash_mb")}})
    done = completed(folder, FRESH)
    if done["positions"] < len(records):
        done = _value_blocks(folder, records, workers, positions_per_block, engine, done)
    join_parts((block_path(folder, block) for block in range(done["blocks"])), Path(output))
    return done


def _value_blocks(folder: Path, records: list[dict], workers: int, positions_per_block: int, engine: dict,
                  done: dict) -> dict:
    limit = {"nodes": engine["nodes"]}
    started = time.perf_counter() - done["wall_seconds"]
    first = done["blocks"] * positions_per_block
    block: list[dict] = []
    fens = (record["fen"] for record in records[first:])
    with tqdm(total=len(records), initial=first, unit="pos", desc="action values", smoothing=0.05,
              dynamic_ncols=True) as bar:
        for index, (values, seconds) in enumerate(values_in_order(fens, workers, engine), first):
            block.append({**records[index], "action_values": values, "action_values_limit": limit})
            done["moves"] += len(values)
            done["engine_seconds"] += seconds
            bar.update(1)
            if len(block) == positions_per_block or index == len(records) - 1:
                done = _write_block(folder, done, block, time.perf_counter() - started)
                block = []
    return done


def _write_block(folder: Path, done: dict, rows: list[dict], wall_seconds: float) -> dict:
    write_part(block_path(folder, done["blocks"]), rows)
    done = {**done, "blocks": done["blocks"] + 1, "positions": done["positions"] + len(rows),
            "engine_seconds": round(done["engine_seconds"], 3), "wall_seconds": round(wall_seconds, 3)}
    write_done(folder, done)
    return done


def throughput_line(done: dict, workers: int) -> str:
    wall = max(done["wall_seconds"], 1e-9)
    return (f"{done['positions']} positions ({done['moves']} moves searched) in {wall:.0f} s on {workers} workers: "
            f"{done['positions'] / wall:.2f} positions/s, {done['moves'] / wall:.1f} moves/s, "
            f"{done['positions'] / (wall * workers):.3f} positions per core-second, "
            f"{done['engine_seconds'] / max(done['moves'], 1) * 1000:.1f} engine ms per move")
