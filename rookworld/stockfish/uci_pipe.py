"""Stockfish over raw UCI pipes: the labelling searches of self-play at scale.

`PipeEngine.analyse(fen)` returns what `Engine.analyse` returns (rookworld/stockfish/engine.py), from the
same commands: `setoption name MultiPV` when the number of lines changes, `ucinewgame` before every
search (a clean hash and search history, so a label does not depend on what came before), the same
`position` and `go` lines. What it leaves out is python-chess's cost per search: an event-loop thread
that every call hops to and back, an `isready` round trip, and a board replayed for the principal
variation of every `info` line (about 45 lines a search at 10,000 nodes and MultiPV 5). Here the
commands go in one write, `info` lines are kept as text by MultiPV index, and only the last one of
each index is read, for its first move and score.

It covers the analyses of `Engine.analyse` only (no `searchmoves`, no play): the commands that need
more keep `Engine`.
"""
from __future__ import annotations

import subprocess
import weakref

import chess
import chess.engine

from rookworld.stockfish.engine import (AnalysisCache, Line, MultiPVAnalyser, limit_record, ranked_lines, resolve_engine_path,
                              score_to_pawns, validate_engine_settings)


class EngineDied(RuntimeError):
    """The engine process closed its output (a crash, an OOM kill)."""


class PipeEngine(MultiPVAnalyser):
    """One Stockfish process on pipes with a per-(fen, limit) LRU cache; the keyword arguments of
    `Engine`. The process starts on the first analysis (or `start`) and stops on `close`, on garbage
    collection, or when this process exits (Stockfish quits at the end of its input)."""

    def __init__(self, path: str = "/usr/games/stockfish", depth: int | None = None, nodes: int | None = None,
                 time_limit: float | None = None, threads: int = 1, hash_mb: int = 16, multipv: int = 5,
                 cache_size: int = 100_000, timeout: float = 30.0) -> None:
        self.path = resolve_engine_path(path)
        validate_engine_settings(depth, nodes, time_limit, threads, hash_mb, multipv, cache_size)
        self.depth, self.nodes, self.time_limit = depth, nodes, time_limit
        self.threads, self.hash_mb, self.multipv, self.timeout = threads, hash_mb, multipv, timeout
        self.limit_record = limit_record(depth, nodes, time_limit)
        self._go = go_command(depth, nodes, time_limit)
        self._cache = AnalysisCache(cache_size)
        self._died = (EngineDied, BrokenPipeError)
        self._process: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None
        self._sent_multipv: int | None = None
        self._name = "unknown"

    @property
    def name(self) -> str:
        """Engine identification, e.g. 'Stockfish 15.1' (starts the engine)."""
        self.start()
        return self._name

    @property
    def pid(self) -> int | None:
        """OS process id of the running engine, None when not started."""
        return None if self._process is None else self._process.pid

    @property
    def cache_misses(self) -> int:
        """Analyses run (the cache's misses)."""
        return self._cache.misses

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._process is not None:
            return
        process = subprocess.Popen([self.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self._process, self._sent_multipv = process, None
        self._finalizer = weakref.finalize(self, _stop, process, self.timeout)
        self._send("uci\n")
        for line in self._lines_until("uciok"):
            if line.startswith("id name "):
                self._name = line[len("id name "):].strip()
        # python-chess's settings: UCI_AnalyseMode on, Threads and Hash as asked
        self._send(f"setoption name UCI_AnalyseMode value true\nsetoption name Threads value {self.threads}\n"
                   f"setoption name Hash value {self.hash_mb}\nisready\n")
        for _ in self._lines_until("readyok"):
            pass

    def close(self) -> None:
        """Stop the engine process. Idempotent; the cache survives, a later analyse restarts."""
        if self._finalizer is not None:
            self._finalizer()
        self._process, self._finalizer = None, None

    # -- analysis --------------------------------------------------------------------------------

    def _search(self, board: chess.Board, multipv: int) -> tuple[Line, ...]:
        self.start()
        commands = []
        if multipv != self._sent_multipv:
            commands.append(f"setoption name MultiPV value {multipv}\n")
            self._sent_multipv = multipv
        fen = board.fen(en_passant="fen")
        position = "position startpos" if fen == chess.STARTING_FEN else f"position fen {fen}"
        self._send("".join(commands) + f"ucinewgame\n{position}\n{self._go}\n")
        last_by_index: dict[int, str] = {}
        for line in self._lines_until("bestmove"):
            if line.startswith("info ") and " pv " in line:
                last_by_index[pv_index(line)] = line
        return ranked_lines(parse_pv_line(line) for line in last_by_index.values())

    def _send(self, text: str) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(text)
        self._process.stdin.flush()

    def _lines_until(self, first_word: str):
        """The engine's lines up to the one that starts with `first_word` (included)."""
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        while True:
            line = stdout.readline()
            if not line:
                raise EngineDied(f"{self.path} exited (code {self._process.poll()}) before {first_word!r}")
            yield line
            if line.startswith(first_word):
                return


def go_command(depth: int | None, nodes: int | None, time_limit: float | None) -> str:
    """python-chess's `go` line for a limit of one kind."""
    if depth is not None:
        return f"go depth {depth}"
    if nodes is not None:
        return f"go nodes {nodes}"
    return f"go movetime {max(1, round(time_limit * 1000))}"


def pv_index(line: str) -> int:
    """The MultiPV index of an `info` line (1 where the line names none, as python-chess reads it)."""
    after = line.partition(" multipv ")[2]
    return int(after.split(" ", 1)[0]) if after else 1


def parse_pv_line(line: str) -> tuple[int, str, float, int]:
    """(MultiPV index, first move, eval in pawns for the side to move, depth) of an `info ... pv` line."""
    tokens = line.split()
    kind, value = tokens[tokens.index("score") + 1: tokens.index("score") + 3]
    score = chess.engine.Cp(int(value)) if kind == "cp" else chess.engine.Mate(int(value))
    depth = int(tokens[tokens.index("depth") + 1]) if "depth" in tokens else 0
    return pv_index(line), tokens[tokens.index("pv") + 1], score_to_pawns(score), depth


def _stop(process: subprocess.Popen, timeout: float) -> None:
    try:
        process.stdin.write("quit\n")
        process.stdin.close()
        process.wait(timeout)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        process.kill()
        process.wait()
