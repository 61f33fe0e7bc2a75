"""A resumable run folder of engine work: the settings it was started with, its done file, parts written
atomically, their join, and results taken back from a pool of engine processes in input order.

    run.json     the settings the run was started with; a resume with others is refused
    done.json    how far the run got (written after the parts it counts, so a kill never counts a part
                 that is not complete)

Used by the sharded self-play (shards.py) and the action values (action_values.py).
"""
from __future__ import annotations

import gzip
import json
import lzma
import multiprocessing
import os
import signal
import threading
from collections import deque
from contextlib import contextmanager
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, Iterator, TypeVar

from rookworld.data.records import write_jsonl

RUN_FILE, DONE_FILE = "run.json", "done.json"

Item = TypeVar("Item")


def write_json_atomically(path: Path, payload: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def check_run_settings(folder: Path, settings: dict) -> None:
    """Write run.json for a new run; refuse, naming each key, a resume whose settings differ."""
    path = folder / RUN_FILE
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        write_json_atomically(path, settings)
        return
    before = json.loads(path.read_text())
    changed = [f"{key} ({before.get(key)!r} -> {settings.get(key)!r})"
               for key in sorted(set(before) | set(settings)) if before.get(key) != settings.get(key)]
    if changed:
        raise ValueError(f"{folder} was started with other settings: {', '.join(changed)}; "
                         "resume with the same ones or use a new folder")


def completed(folder: Path, fresh: dict) -> dict:
    """done.json's figures, or `fresh` for a run that has completed nothing yet."""
    path = folder / DONE_FILE
    return json.loads(path.read_text()) if path.exists() else dict(fresh)


def write_done(folder: Path, done: dict) -> None:
    write_json_atomically(folder / DONE_FILE, done)


def write_part(path: Path, rows: list[dict]) -> None:
    """A gzipped JSONL part, atomically (a kill leaves the whole part or none)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.gz")
    write_jsonl(tmp, rows)
    os.replace(tmp, path)


def join_parts(parts: Iterable[Path], target: Path) -> None:
    """Concatenate gzipped parts into `target`, atomically: their bytes for a .gz target (gzip members
    joined byte for byte are one gzip stream), their text for a plain one, xz-compressed for .xz."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    with (lzma.open(tmp, "wb", preset=6) if target.suffix == ".xz" else open(tmp, "wb")) as out:
        for part in parts:
            data = part.read_bytes()
            out.write(data if target.suffix == ".gz" else gzip.decompress(data))
    os.replace(tmp, target)


@contextmanager
def engine_pool(workers: int, initializer: Callable, initargs: tuple) -> Iterator[ProcessPoolExecutor]:
    """`workers` processes, each set up by `initializer(*initargs)`. A stop (Ctrl-C, SIGTERM) is the
    parent's alone: the workers, and the engines they start, ignore SIGINT, which a terminal sends to the
    whole process group. However the block ends (done, a break, a stop), work still queued is cancelled and
    the work in progress awaited."""
    pool = ProcessPoolExecutor(workers, mp_context=_SigintIgnoringSpawn(), initializer=initializer, initargs=initargs)
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class _SigintIgnoringProcess(multiprocessing.context.SpawnProcess):
    """A spawned process that ignores SIGINT from its first instruction: started from the main thread, the
    disposition is set while it is started, survives the exec, and Python installs no KeyboardInterrupt
    handler over an ignored SIGINT (set only once the worker ran, a Ctrl-C during its imports printed a
    traceback); started from another thread, where signal.signal cannot be called, from its run() on."""

    def start(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return super().start()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ignores it for the fork's moment
        try:
            super().start()
        finally:
            signal.signal(signal.SIGINT, previous)

    def run(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited by the engine processes the worker starts
        super().run()


class _SigintIgnoringSpawn(multiprocessing.context.SpawnContext):
    # spawn, not fork: a forked child would inherit the parent's engine threads half-way
    Process = _SigintIgnoringProcess


def in_order(pool: ProcessPoolExecutor, work: Callable, items: Iterable[Item],
             window: int) -> Iterator[tuple[Item, object]]:
    """(item, work(item)) in the items' order, with `window` items in flight."""
    pending: deque[tuple[Item, Future]] = deque()
    for item in items:
        pending.append((item, pool.submit(work, item)))
        if len(pending) >= window:
            first, future = pending.popleft()
            yield first, future.result()
    while pending:
        first, future = pending.popleft()
        yield first, future.result()
