"""Self-play annotation at scale: games over a pool of engine processes, written in resumable shards.

A run folder holds

    run.json                         the settings the run was started with; a resume with others is refused
                                     (a larger target is no other setting: it extends the run)
    <split>/shard-NNNNN.jsonl.gz     the positions of games [N*G, (N+1)*G) (G = games per shard) in <split>
    done.json                        how many shards are complete, their positions, the throughput so far
    <split>.jsonl.gz                 a split's shards joined, written when the run reaches its target
                                     (done.json's "splits" then counts them and confirms that no position
                                     and no game is in two splits)

Games are numbered and each is fixed by (seed, game) alone (rookworld/data/selfplay.py); the parent
takes the games back in their order, drops positions seen before (in an earlier game, an --exclude
file, any split) and writes a shard once all its games are back: the shard files first, each
atomically, then done.json. A killed run resumes after its last complete shard with the same seen
set, so a killed and resumed run writes exactly the files of an unkilled one, whatever the number
of workers.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict
from itertools import count
from pathlib import Path
from typing import Iterable, Iterator

from tqdm import tqdm

from rookworld.data.records import iter_jsonl, position_key, write_jsonl
from rookworld.data.selfplay import SPLITS_BY_GAME, GameSettings, play_game
from rookworld.engine import Engine

RUN_FILE, DONE_FILE = "run.json", "done.json"
WINDOW_PER_WORKER = 4  # games in flight per worker: enough to hide the slowest game of a shard


def shard_path(folder: Path, split: str, shard: int) -> Path:
    return folder / split / f"shard-{shard:05d}.jsonl.gz"


def joined_path(folder: Path, split: str) -> Path:
    return folder / f"{split}.jsonl.gz"


def _write_json_atomically(path: Path, payload: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def check_run_settings(folder: Path, settings: dict) -> None:
    """Write run.json for a new run; refuse, naming each key, a resume whose settings differ."""
    path = folder / RUN_FILE
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        _write_json_atomically(path, settings)
        return
    before = json.loads(path.read_text())
    changed = [f"{key} ({before.get(key)!r} -> {settings.get(key)!r})"
               for key in sorted(set(before) | set(settings)) if before.get(key) != settings.get(key)]
    if changed:
        raise ValueError(f"{folder} was started with other settings: {', '.join(changed)}; "
                         "resume with the same ones or use a new folder")


def completed(folder: Path) -> dict:
    path = folder / DONE_FILE
    return json.loads(path.read_text()) if path.exists() else {"shards": 0, "positions": 0, "analysed": 0,
                                                                "engine_seconds": 0.0, "wall_seconds": 0.0}


def seen_positions(folder: Path, shards: int, exclude: Iterable[str]) -> set[str]:
    """Position keys of the complete shards (every split) and of the excluded positions."""
    seen = set(exclude)
    for split in SPLITS_BY_GAME:
        for shard in range(shards):
            seen.update(position_key(record["fen"]) for _, record in iter_jsonl(shard_path(folder, split, shard)))
    return seen


# -- the worker side ---------------------------------------------------------------------------------

_worker: tuple[Engine, int, GameSettings] | None = None


def _start_worker(engine_kwargs: dict, seed: int, settings: GameSettings) -> None:
    global _worker
    engine = Engine(**engine_kwargs)
    engine.start()
    _worker = (engine, seed, settings)


def _play(game: int) -> tuple[list[dict], int, float]:
    """(records, analyses run, engine seconds) of one game."""
    assert _worker is not None
    engine, seed, settings = _worker
    misses, started = engine.cache_misses, time.perf_counter()
    records = play_game(engine, seed, game, settings)
    return records, engine.cache_misses - misses, time.perf_counter() - started


def _in_order(pool: ProcessPoolExecutor, games: Iterator[int], window: int) -> Iterator[tuple[int, tuple]]:
    """(game, result) in game order, with `window` games in flight."""
    pending: deque[tuple[int, Future]] = deque()
    for game in games:
        pending.append((game, pool.submit(_play, game)))
        if len(pending) >= window:
            first, future = pending.popleft()
            yield first, future.result()
    while pending:
        first, future = pending.popleft()
        yield first, future.result()


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
    done = completed(folder)
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
        _write_json_atomically(folder / DONE_FILE, done)
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
    context = multiprocessing.get_context("spawn")  # a forked child would inherit engine threads
    bar = tqdm(total=target, initial=done["positions"], unit="pos", desc="self-play positions", smoothing=0.05,
               dynamic_ncols=True)
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                             initargs=(engine_kwargs, seed, settings)) as pool:
        rows: dict[str, list[dict]] = {split: [] for split in SPLITS_BY_GAME}
        for game, (records, analysed, engine_seconds) in _in_order(pool, count(first_game), WINDOW_PER_WORKER * workers):
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
                    pool.shutdown(wait=True, cancel_futures=True)
                    break
    bar.close()
    return done


def _write_shard(folder: Path, shard: int, rows: dict[str, list[dict]], done: dict, wall_seconds: float) -> dict:
    for split, records in rows.items():
        path = shard_path(folder, split, shard)
        tmp = path.with_name(path.name + ".tmp.gz")
        write_jsonl(tmp, records)
        os.replace(tmp, path)
    positions = done["positions"] + sum(map(len, rows.values()))
    done = {**{key: value for key, value in done.items() if key != "splits"}, "shards": shard + 1, "positions": positions, "wall_seconds": round(wall_seconds, 3),
            "by_split": {split: done.get("by_split", {}).get(split, 0) + len(rows[split]) for split in rows}}
    done["engine_seconds"] = round(done["engine_seconds"], 3)
    _write_json_atomically(folder / DONE_FILE, done)
    return done


def _join(folder: Path, split: str, shards: int) -> None:
    """Concatenate a split's shards: gzip members joined byte for byte are one gzip stream."""
    target = joined_path(folder, split)
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "wb") as out:
        for shard in range(shards):
            out.write(shard_path(folder, split, shard).read_bytes())
    os.replace(tmp, target)


def throughput_line(done: dict, workers: int) -> str:
    wall = max(done["wall_seconds"], 1e-9)
    return (f"{done['positions']} positions ({done['analysed']} analyses, duplicates dropped) in {wall:.0f} s "
            f"on {workers} workers: {done['positions'] / wall:.1f} positions/s, "
            f"{done['positions'] / (wall * workers):.2f} per core-second, "
            f"{done['engine_seconds'] / max(done['analysed'], 1) * 1000:.1f} engine ms per analysis")
