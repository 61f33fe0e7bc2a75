"""Stockfish wrapper: one persistent UCI process, an LRU analysis cache, and reliable shutdown.

`Engine.analyse(fen)` returns the MultiPV candidates ranked best-first for the side to move, with
evals in pawns from the side-to-move's point of view (mate in n -> +-(1000 - n/100)), the
convention of the published RookWorld data (docs/tasks.md).

Reproducible labels: every analysis starts a new game (`ucinewgame`, which clears Stockfish's hash
and search history), so with one thread and a `nodes` or `depth` limit a position's label does not
depend on what was analysed before it or in which process. `analyse_many` spreads positions over
worker processes, one engine each.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Self

import chess
import chess.engine
import yaml

from rookworld.tasks import Candidate

ENGINE_CONFIG = Path(__file__).resolve().parents[2] / "conf" / "engine" / "stockfish.yaml"


def engine_config() -> dict:
    """conf/engine/stockfish.yaml: the Engine knobs (the defaults of the data commands)."""
    knobs = yaml.safe_load(ENGINE_CONFIG.read_text())
    knobs.pop("_target_")
    return knobs

MATE_BASE = 1000.0


class EngineNotFoundError(FileNotFoundError):
    """The Stockfish binary is missing or not executable."""


@dataclass(frozen=True)
class Line:
    """One MultiPV line as Stockfish reports it: its first move, eval (pawns, side to move) and depth."""

    move: str
    eval: float
    depth: int


_live_finalizers: set[weakref.finalize] = set()


def _close_all_engines() -> None:
    for finalizer in list(_live_finalizers):
        finalizer()


# python-chess runs each engine's event loop on a non-daemon thread, and the interpreter joins
# non-daemon threads *before* plain atexit hooks run: a forgotten engine would hang the exit.
# threading's own pre-join hook (also used by concurrent.futures) runs early enough.
try:
    threading._register_atexit(_close_all_engines)  # type: ignore[attr-defined]
except (AttributeError, RuntimeError):  # pragma: no cover - other interpreters
    import atexit

    atexit.register(_close_all_engines)


def _shutdown(simple_engine: chess.engine.SimpleEngine, finalizer_box: list) -> None:
    try:
        simple_engine.quit()
    except Exception:
        pass  # already dead, or busy past the timeout: close() below kills it
    finally:
        simple_engine.close()
        _live_finalizers.difference_update(finalizer_box)


def resolve_engine_path(path: str) -> str:
    """Absolute path of an executable engine, or EngineNotFoundError naming the config key."""
    found = shutil.which(path) if os.sep not in path else path
    if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise EngineNotFoundError(
            f"Stockfish not found at {path!r} (annotate --engine-path, or path in conf/engine/stockfish.yaml; "
            "on Debian: apt-get install stockfish -> /usr/games/stockfish)"
        )
    return found


def score_to_pawns(score: chess.engine.Score) -> float:
    """Pawns from the POV the score was taken in; mate in n -> +-(1000 - n/100)."""
    mate = score.mate()
    if mate is None:
        return round(score.score() / 100, 2)
    if mate > 0:
        return round(MATE_BASE - mate / 100, 2)
    return round(-MATE_BASE - mate / 100, 2)  # mated in |mate|: -(1000 - |mate|/100)


class MultiPVAnalyser:
    """`analyse` and `analyse_lines` of a Stockfish process over its `_search(board, multipv)`: the
    LRU cache, fewer lines where fewer moves are legal, and one fresh start when the process died."""

    depth: int | None
    nodes: int | None
    time_limit: float | None
    multipv: int
    _cache: AnalysisCache
    _died: tuple[type[Exception], ...]

    def analyse(self, fen: str) -> tuple[Candidate, ...]:
        """Up to `multipv` candidates, best first, evals in pawns for the side to move."""
        return self._cache.get_or_compute((fen, self.depth, self.nodes, self.time_limit, self.multipv),
                                          lambda: candidates_of(self.analyse_lines(chess.Board(fen).fen())))

    def analyse_lines(self, fen: str) -> tuple[Line, ...]:
        """The MultiPV lines in Stockfish's order, with their depths (not cached)."""
        board = chess.Board(fen)
        n_legal = board.legal_moves.count()
        if n_legal == 0:
            return ()
        multipv = min(self.multipv, n_legal)
        try:
            return self._search(board, multipv)
        except self._died:
            self.close()  # the process died (crash, OOM kill): one fresh start, then give up
            return self._search(board, multipv)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _search(self, board: chess.Board, multipv: int) -> tuple[Line, ...]:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class Engine(MultiPVAnalyser):
    """Persistent Stockfish process with a per-(fen, limit) LRU cache.

    Exactly one of `depth` / `nodes` / `time_limit` (seconds) must be set (the labels' limit is in
    conf/engine/stockfish.yaml: `build` it, or pass the limit); `time_limit` is not reproducible
    (it depends on the machine's speed and load). The process starts on the first
    analysis (or on `__enter__`) and is stopped by `close()`, by garbage collection, or at
    interpreter exit, whichever comes first.
    """

    def __init__(
        self,
        path: str = "/usr/games/stockfish",
        depth: int | None = None,
        nodes: int | None = None,
        time_limit: float | None = None,
        threads: int = 1,
        hash_mb: int = 16,
        multipv: int = 5,
        cache_size: int = 100_000,
        timeout: float = 30.0,
    ) -> None:
        self.path = resolve_engine_path(path)
        validate_engine_settings(depth, nodes, time_limit, threads, hash_mb, multipv, cache_size)
        self.depth = depth
        self.nodes = nodes
        self.time_limit = time_limit
        self.threads = threads
        self.hash_mb = hash_mb
        self.multipv = multipv
        self.cache_size = cache_size
        self.timeout = timeout
        self._cache = AnalysisCache(cache_size)
        self._died = (chess.engine.EngineTerminatedError,)
        self._engine: chess.engine.SimpleEngine | None = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._engine is not None:
                return
            try:
                engine = chess.engine.SimpleEngine.popen_uci(self.path, timeout=self.timeout)
            except (FileNotFoundError, PermissionError) as exc:
                raise EngineNotFoundError(str(exc)) from None
            box: list = []
            finalizer = weakref.finalize(self, _shutdown, engine, box)
            box.append(finalizer)
            _live_finalizers.add(finalizer)
            self._engine, self._finalizer = engine, finalizer
            engine.configure({"Threads": self.threads, "Hash": self.hash_mb})

    def close(self) -> None:
        """Stop the engine process. Idempotent; the cache survives, a later analyse restarts."""
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()
            self._engine, self._finalizer = None, None

    @property
    def pid(self) -> int | None:
        """OS process id of the running engine, None when not started."""
        return None if self._engine is None else self._engine.transport.get_pid()

    @property
    def name(self) -> str:
        """Engine identification, e.g. 'Stockfish 15.1' (starts the engine)."""
        return self._running().id.get("name", "unknown")

    # -- analysis --------------------------------------------------------------------------------

    @property
    def limit(self) -> chess.engine.Limit:
        return chess.engine.Limit(depth=self.depth, nodes=self.nodes, time=self.time_limit)

    @property
    def limit_record(self) -> dict:
        """The limit that is set, as stored with each annotation, e.g. {"nodes": 100000}."""
        return limit_record(self.depth, self.nodes, self.time_limit)

    @property
    def cache_hits(self) -> int:
        return self._cache.hits

    @property
    def cache_misses(self) -> int:
        return self._cache.misses

    def _search(self, board: chess.Board, multipv: int) -> tuple[Line, ...]:
        return _lines_from_infos(self._analyse_from_clean_state(board, multipv), board.turn)

    def evaluate_move(self, fen: str, move: str) -> float:
        """The eval of one root move, pawns for the side to move: the search restricted to that move
        (from a clean state, at this engine's limit)."""
        board = chess.Board(fen)
        info = self._running().analyse(board, self.limit, root_moves=[chess.Move.from_uci(move)], game=object())
        return score_to_pawns(info["score"].pov(board.turn))

    def _analyse_from_clean_state(self, board: chess.Board, multipv: int) -> list[dict]:
        # A game object python-chess has not seen makes it send `ucinewgame` first: the hash and
        # the search history are cleared, so earlier analyses cannot change this one.
        return self._running().analyse(board, self.limit, multipv=multipv, game=object())

    def _running(self) -> chess.engine.SimpleEngine:
        self.start()
        assert self._engine is not None
        return self._engine


def validate_engine_settings(depth: int | None, nodes: int | None, time_limit: float | None, threads: int,
                             hash_mb: int, multipv: int, cache_size: int) -> None:
    """One-line ValueErrors for a bad limit (exactly one of depth / nodes / time_limit), thread count,
    hash size, MultiPV or cache size."""
    _validate_limits(depth, nodes, time_limit)
    for name, value in (("threads", threads), ("hash_mb", hash_mb), ("multipv", multipv)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"engine.{name} must be a positive integer, got {value!r}")
    if cache_size < 0:
        raise ValueError(f"engine.cache_size must be >= 0, got {cache_size!r}")


def limit_record(depth: int | None, nodes: int | None, time_limit: float | None) -> dict:
    """The limit that is set, as stored with each annotation, e.g. {"nodes": 100000}."""
    return {key: value for key, value in (("depth", depth), ("nodes", nodes), ("time", time_limit))
            if value is not None}


class AnalysisCache:
    """An LRU cache of analyses by (fen, limit, multipv) key, counting hits and misses (analyses run);
    size 0 keeps nothing."""

    def __init__(self, size: int) -> None:
        self.size, self.hits, self.misses = size, 0, 0
        self._entries: OrderedDict[tuple, tuple[Candidate, ...]] = OrderedDict()

    def get_or_compute(self, key: tuple, compute) -> tuple[Candidate, ...]:
        cached = self._entries.get(key)
        if cached is not None:
            self.hits += 1
            self._entries.move_to_end(key)
            return cached
        self.misses += 1
        value = compute()
        if self.size:
            self._entries[key] = value
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value


def candidates_of(lines: tuple[Line, ...]) -> tuple[Candidate, ...]:
    return tuple(Candidate(move=line.move, eval=line.eval) for line in lines)


def _validate_limits(depth: int | None, nodes: int | None, time_limit: float | None) -> None:
    if sum(value is not None for value in (depth, nodes, time_limit)) != 1:
        raise ValueError(
            f"set exactly one of engine.depth / engine.nodes / engine.time_limit, got depth={depth!r}, "
            f"nodes={nodes!r}, time_limit={time_limit!r}"
        )
    for name, value in (("depth", depth), ("nodes", nodes)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"engine.{name} must be a positive integer, got {value!r}")
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"engine.time_limit must be > 0 seconds, got {time_limit!r}")


def _lines_from_infos(infos: list[dict], turn: chess.Color) -> tuple[Line, ...]:
    """Lines in Stockfish's MultiPV order, which is the best-first order the labels keep.

    A nodes limit can stop Stockfish inside an iteration: the lines it has searched at the new
    depth come first, sorted by their eval; the others keep the score of one iteration less and
    follow, even where that shallower score is higher. Re-sorting all lines by eval would promote
    those shallower lines; a deeper search sides with Stockfish's line 1 (bundled data README).
    """
    return ranked_lines((info.get("multipv", 1), info["pv"][0].uci(), score_to_pawns(info["score"].pov(turn)),
                         int(info.get("depth", 0))) for info in infos if info.get("pv"))


def ranked_lines(entries: Iterable[tuple[int, str, float, int]]) -> tuple[Line, ...]:
    """`Line`s of (multipv index, first move, eval in pawns, depth) entries: in MultiPV order, a move
    repeated by a later index dropped."""
    seen: set[str] = set()
    lines = []
    for _, move, pawns, depth in sorted(entries, key=lambda entry: entry[0]):
        if move not in seen:
            seen.add(move)
            lines.append(Line(move=move, eval=pawns, depth=depth))
    return tuple(lines)


# -- many positions over worker processes ------------------------------------------------------------

_worker_engine: Engine | None = None


def _start_worker(engine_kwargs: dict) -> None:
    global _worker_engine
    _worker_engine = Engine(**{**engine_kwargs, "cache_size": 0})
    _worker_engine.start()  # engine start-up is not part of the first analysis


def _analyse_timed(engine: Engine, fen: str, lines: bool) -> tuple[tuple, float]:
    started = time.perf_counter()
    result = engine.analyse_lines(fen) if lines else engine.analyse(fen)
    return result, time.perf_counter() - started


def _analyse_in_worker(job: tuple[str, bool]) -> tuple[tuple, float]:
    assert _worker_engine is not None
    return _analyse_timed(_worker_engine, *job)


def analyse_many(fens: list[str], workers: int, progress=None, seconds: list[float] | None = None,
                 lines: bool = False, **engine_kwargs) -> list[tuple]:
    """Candidates of each FEN (its `Line`s with `lines=True`), in input order, from `workers`
    processes with one engine each.

    `engine_kwargs` are Engine's; `progress(done)` is called after each position; `seconds`, when
    given, receives each analysis's wall time (engine start-up excluded).
    """
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if workers == 1:
        with Engine(**{**engine_kwargs, "cache_size": 0}) as engine:
            engine.start()
            return [_collect(progress, seconds, i, _analyse_timed(engine, fen, lines))
                    for i, fen in enumerate(fens, 1)]
    # spawn, not fork: a forked child would inherit the parent's engine threads half-way
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_start_worker, initargs=(engine_kwargs,)) as pool:
        results = pool.imap(_analyse_in_worker, [(fen, lines) for fen in fens], chunksize=1)
        out = [_collect(progress, seconds, i, result) for i, result in enumerate(results, 1)]
        pool.close()  # workers exit normally, and their exit hooks stop their engines
        pool.join()
    return out


def _collect(progress, seconds: list[float] | None, done: int, result: tuple[tuple, float]) -> tuple:
    analysis, elapsed = result
    if seconds is not None:
        seconds.append(elapsed)
    if progress is not None:
        progress(done)
    return analysis
