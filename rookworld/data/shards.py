"""Self-play annotation at scale: games over a pool of engine processes, written in resumable shards.

A run folder holds

    run.json                         the settings the run was started with; a resume with others is refused
                                     (a larger target is no other setting: it extends the run)
    <split>/shard-NNNNN.jsonl.gz     the positions of games [N*G, (N+1)*G) (G = games per shard) in <split>
    done.json                        how many shards are complete, their positions, the throughput so far
    <split>.jsonl.gz                 a split's shards joined, written when the run reaches its target
                                     (done.json's "splits" then counts them and confirms that no position
                                     and no game is in two splits)

Each worker plays games with one Stockfish process over raw UCI pipes (rookworld/stockfish/uci_pipe.py: the
labels of `Engine.analyse`, without python-chess's cost per search). Games are numbered and each is
fixed by (seed, game) alone (rookworld/data/selfplay.py); the parent
takes the games back in their order, drops positions seen before (in an earlier game, an --exclude
file, any split) and writes a shard once all its games are back: the shard files first, each
atomically, then done.json. A killed run resumes after its last complete shard with the same seen
set, so a killed and resumed run writes exactly the files of an unkilled one, whatever the number
of workers.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from itertools import count
from pathlib import Path
from typing import Iterable

from tqdm import tqdm

from rookworld.data.records import iter_jsonl, position_key
from rookworld.data.run_folder import (check_run_settings, completed, engine_pool, in_order, join_parts, write_done,
                                       write_part)
from rookworld.data.selfplay import SPLITS_BY_GAME, GameSettings, play_game
from rookworld.stockfish.uci_pipe import PipeEngine

FRESH = {"shards": 0, "positions": 0, "analysed": 0, "engine_seconds": 0.0, "wall_seconds": 0.0}
WINDOW_PER_WORKER = 4  # games in flight per worker: enough to hide the slowest game of a shard


def shard_path(folder: Path, split: str, shard: int) -> Path:
    return folder / split / f"shard-{shard:05d}.jsonl.gz"


def joined_path(folder: Path, split: str) -> Path:
    return folder / f"{split}.jsonl.gz"


def seen_positions(folder: Path, shards: int, exclude: Iterable[str]) -> set[str]:
    """Position keys of the complete shards (every split) and of the excluded positions."""
    seen = set(exclude)
    for split in SPLITS_BY_GAME:
        for shard in range(shards):
            seen.update(position_key(record["fen"]) for _, record in iter_jsonl(shard_path(folder, split, shard)))
    return seen


# -- the worker side ---------------------------------------------------------------------------------

_worker: tuple[PipeEngine, int, GameSettings] | None = None


def _start_worker(engine_kwargs: dict, seed: int, settings: GameSettings) -> None:
    global _worker
    engine = PipeEngine(**engine_kwargs)
    engine.start()
    _worker = (engine, seed, settings)


def _play(game: int) -> tuple[list[dict], int, float]:
    """(records, analyses run, engine seconds) of one game."""
    assert _worker is not None
    engine, seed, settings = _worker
    misses, started = engine.cache_misses, time.perf_counter()
    records = play_game(engine, seed, game, settings)
    return records, engine.cache_misses - misses, time.perf_counter() - started


# -- the parent side ---------------------------------------------------------------------------------


def run_shards(folder: str | Path, target: int, *, workers: int, seed: int, games_per_shard: int,
               settings: GameSettings, engine_kwargs: dict, exclude: Iterable[str] = (),
               time_limit_s: float | None = None) -> dict:
    """Play and label games until the shards hold >= `target` positions (resuming a killed run), join
    each split's shards, and return done.json's figures. With `time_limit_s`, stop after the shard that
    is complete when the limit has passed (a later call resumes there); the splits are joined only at
    the target."""
    folder = Path(folder)
    engine = {key: value for key, value in engine_kwargs.items() if key not in ("path", "timeout", "cache_size")}
    check_run_settings(folder, {"seed": seed, "games_per_shard": games_per_shard, "engine": engine,
                                "games": asdict(settings)})
    done = completed(folder, FRESH)
    if done["positions"] < target:
        seen = seen_positions(folder, done["shards"], exclude)
        deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
        done = _play_shards(folder, target, workers, seed, games_per_shard, settings, engine_kwargs, seen, done,
                            deadline)
    if done["positions"] < target:
        return done
    for split in SPLITS_BY_GAME:
        _join(folder, split, done["shards"])
    if "splits" not in done:
        done["splits"] = check_splits(folder)
        write_done(folder, done)
    return done


def check_splits(folder: Path) -> dict:
    """Per split: positions, games and phases of the joined files; raises if a position or a game
    appears twice (in one split or across splits)."""
    position_split: dict[str, str] = {}
    game_split: dict[int, str] = {}
    report = {}
    for split in SPLITS_BY_GAME:
        phases: dict[str, int] = {}
        games: set[int] = set()
        for line_no, record in iter_jsonl(joined_path(folder, split)):
            key = position_key(record["fen"])
            if key in position_split:
                raise ValueError(f"{joined_path(folder, split)}:{line_no}: position also in {position_split[key]}")
            position_split[key] = split
            if game_split.setdefault(record["game"], split) != split:
                raise ValueError(f"{joined_path(folder, split)}:{line_no}: game {record['game']} also in "
                                 f"{game_split[record['game']]}")
            games.add(record["game"])
            phases[record["phase"]] = phases.get(record["phase"], 0) + 1
        report[split] = {"positions": sum(phases.values()), "games": len(games), "phases": phases}
    return report


def _play_shards(folder: Path, target: int, workers: int, seed: int, games_per_shard: int, settings: GameSettings,
                 engine_kwargs: dict, seen: set[str], done: dict, deadline: float | None) -> dict:
    first_game = done["shards"] * games_per_shard
    started = time.perf_counter() - done["wall_seconds"]
    total = target if deadline is None else None  # under a time limit the clock may end it first: no total to show
    with tqdm(total=total, initial=done["positions"], unit="pos", desc="self-play positions", smoothing=0.05,
              dynamic_ncols=True) as bar, engine_pool(workers, _start_worker, (engine_kwargs, seed, settings)) as pool:
        rows: dict[str, list[dict]] = {split: [] for split in SPLITS_BY_GAME}
        for game, (records, analysed, engine_seconds) in in_order(pool, _play, count(first_game), WINDOW_PER_WORKER * workers):
            for record in records:
                key = position_key(record["fen"])
                if key not in seen:
                    seen.add(key)
                    rows[record["split"]].append(record)
                    bar.update(1)
            done["analysed"] += analysed
            done["engine_seconds"] += engine_seconds
            if (game + 1) % games_per_shard == 0:
                done = _write_shard(folder, game // games_per_shard, rows, done, time.perf_counter() - started)
                rows = {split: [] for split in SPLITS_BY_GAME}
                if done["positions"] >= target or (deadline is not None and time.monotonic() > deadline):
                    break  # engine_pool cancels the games still queued
    return done


def _write_shard(folder: Path, shard: int, rows: dict[str, list[dict]], done: dict, wall_seconds: float) -> dict:
    for split, records in rows.items():
        write_part(shard_path(folder, split, shard), records)
    positions = done["positions"] + sum(map(len, rows.values()))
    done = {**{key: value for key, value in done.items() if key != "splits"}, "shards": shard + 1, "positions": positions, "wall_seconds": round(wall_seconds, 3),
            "by_split": {split: done.get("by_split", {}).get(split, 0) + len(rows[split]) for split in rows}}
    done["engine_seconds"] = round(done["engine_seconds"], 3)
    write_done(folder, done)
    return done


def _join(folder: Path, split: str, shards: int) -> None:
    join_parts((shard_path(folder, split, shard) for shard in range(shards)), joined_path(folder, split))


def throughput_line(done: dict, workers: int) -> str:
    wall = max(done["wall_seconds"], 1e-9)
    return (f"{done['positions']} positions ({done['analysed']} analyses, duplicates dropped) in {wall:.0f} s "
            f"on {workers} workers: {done['positions'] / wall:.1f} positions/s, "
            f"{done['positions'] / (wall * workers):.2f} per core-second, "
            f"{done['engine_seconds'] / max(done['analysed'], 1) * 1000:.1f} engine ms per analysis")
