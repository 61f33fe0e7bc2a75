"""The A: training stream: endless, seeded A: problems from the training positions, in configured
case shares (conf/data/bundled.yaml `arbiter_cases`; the default is the held-out A: set's mix).

stream[i] is a pure function of (positions, shares, seed, i), so a resumed run continues exactly and
two runs with one seed see the same problems. Cases every position offers (normal, illegal of each
kind, seventyfive_moves) are drawn on the fly from a random training position. Rare cases
(castling, en passant, promotion, checkmate, stalemate, insufficient material) come from pools
collected once per process: seeded random walks (move_cases.biased_random_move) that start at
training positions, until each pool holds `pool_size` distinct moves or `pool_walks` walks are spent.
A "missing_promotion" illegal move is a pooled promotion written without its piece (e7e8).
With `pool_cache` (data.arbiter_pool_cache) the pools are also stored on disk and reused by later
processes on the same positions: every sweep worker and test process would otherwise spend seconds
on the same walks. The file is `<pool_cache>/<key>.json`, the key a SHA-256 of the positions, the
pool settings, this module's and move_cases.py's source and the python-chess version (written to a
temporary file, then renamed: readers never see half a file).

Pools are dealt without replacement: the k-th draw of a pooled case takes item k of a seeded
shuffle of its pool, and only a pool dealt out in full starts a new shuffle. A pooled transition
therefore repeats at most ceil(draws of its case / pool size) times; `python -m
rookworld.commands.repeats` counts the repeats of a run's draws.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import random
import tempfile
from collections.abc import Mapping, Sequence
from functools import lru_cache, partial
from pathlib import Path

import chess

from rookworld.data.move_cases import (CASES, ILLEGAL_KINDS, RARE_CASES, biased_random_move, illegal_moves,
                                       legal_move_case, rare_moves, recent_history, with_seventyfive_clock)
from rookworld.data.records import position_key
from rookworld.tasks.arbiter import MAX_HISTORY, arbiter_problem, arbiter_truth, history_with_move
from rookworld.tasks.problem import Problem

WALK_PLIES = 40          # the longest random walk from a training position
MAX_DRAW_ATTEMPTS = 2000  # positions tried for an on-the-fly case (the rarest, a pinned piece, is in ~4%)

Position = tuple[str, tuple[str, ...]]  # (FEN, the moves that led to it, oldest first)
Transition = tuple[str, tuple[str, ...], str]  # (FEN, history before the move, UCI move)


def check_case_shares(shares: Mapping[str, float], key: str = "data.arbiter_cases") -> dict[str, float]:
    """The positive shares, keyed by case; a one-line ValueError (naming the config `key`) for an unknown
    case, a bad value or shares that do not sum to 1."""
    unknown = sorted(set(shares) - set(CASES))
    if unknown:
        raise ValueError(f"{key} has unknown cases {unknown}; expected {list(CASES)}")
    clean = {case: shares.get(case, 0.0) for case in CASES}
    for case, share in clean.items():
        if not isinstance(share, (int, float)) or not math.isfinite(share) or share < 0:
            raise ValueError(f"{key}.{case}={share!r}: must be a finite number >= 0")
    total = math.fsum(clean.values())
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"{key}: the shares must sum to 1, got {total:g}")
    return {case: float(share) for case, share in clean.items() if share > 0}


def case_counts(shares: Mapping[str, float], total: int) -> dict[str, int]:
    """`total` items dealt in the case `shares` (checked): each case its share rounded down, the items
    left over to the largest remainders, so the counts sum to `total`."""
    exact = {case: share * total for case, share in check_case_shares(shares).items()}
    counts = {case: math.floor(value) for case, value in exact.items()}
    by_remainder = sorted(exact, key=lambda case: counts[case] - exact[case])
    for case in by_remainder[: total - sum(counts.values())]:
        counts[case] += 1
    return counts


class ArbiterStream:
    """An endless, seeded sequence of A: training problems: stream[i]."""

    def __init__(self, positions: Sequence[Position], shares: Mapping[str, float], seed: int,
                 pool_size: int, pool_walks: int, pool_cache: str | None) -> None:
        if not positions:
            raise ValueError("A: training needs at least one training position")
        self.positions = tuple(positions)
        self.shares = check_case_shares(shares)
        self.seed = int(seed)
        pooled = tuple(case for case in RARE_CASES if case in self.shares
                       or (case == "promotion" and "illegal" in self.shares))
        collect = collect_pools if pool_cache is None else partial(stored_pools, cache_dir=pool_cache)
        self.pools = dict(collect(self.positions, pooled, self.seed, pool_size, pool_walks))
        empty = [case for case in pooled if not self.pools[case]]
        if empty:
            raise ValueError(f"data.arbiter_cases asks for {empty}, but {pool_walks} random walks from the "
                             "training positions found no such move: raise data.arbiter_pool_walks")
        if "promotion" in self.pools:  # one transition per promotion square, however many pieces
            self.pools["missing_promotion"] = sorted({(fen, history, move[:4])
                                                      for fen, history, move in self.pools["promotion"]})
        self._ranks: list[int] = []  # _ranks[i]: how many draws before i dealt from the same pool
        self._dealt: dict[str, int] = {}
        self._shuffles: dict[tuple[str, int], list[int]] = {}

    def excluding(self, keys: frozenset[str]) -> ArbiterStream:
        """This stream without the positions whose key (records.position_key) is in `keys`: the training
        positions of on-the-fly cases and the pooled transitions starting there (the held-out parts' and the final
        pool's positions, which a random walk may reach). Unchanged, item for item, when none of them is there."""
        self.positions = tuple(p for p in self.positions if position_key(p[0]) not in keys)
        if not self.positions:
            raise ValueError("A: training needs a training position outside the held-out parts and the final pool")
        for name, pool in self.pools.items():
            kept = [t for t in pool if position_key(t[0]) not in keys]
            if len(kept) < len(pool):
                if not kept:
                    raise ValueError(f"data.arbiter_cases: every pooled {name} move starts at a held-out or "
                                     "final-pool position: raise data.arbiter_pool_walks")
                self.pools[name] = kept
        return self

    def __getitem__(self, index: int) -> Problem:
        fen, history, move = self.transition(index)
        return arbiter_problem(arbiter_truth(fen, move, history_with_move(history, move)))

    def transition(self, index: int) -> Transition:
        """(FEN, history before the move, UCI move) of stream[index]."""
        rng = random.Random(f"{self.seed}:A:{index}")
        case, kind = self._draw(rng)
        if case in self.pools:
            return self._deal(case, index)
        if kind == "missing_promotion":
            return self._deal(kind, index)
        return self._on_the_fly(case, kind, rng)

    def _draw(self, rng: random.Random) -> tuple[str, str | None]:
        """The case of a draw, and for an illegal move its kind (the first values of its rng)."""
        case = rng.choices(list(self.shares), weights=list(self.shares.values()))[0]
        return case, rng.choice(ILLEGAL_KINDS) if case == "illegal" else None

    def drawn_case(self, index: int) -> str:
        """The case stream[index] was drawn for: a case, or "illegal:KIND"."""
        case, kind = self._draw(random.Random(f"{self.seed}:A:{index}"))
        return f"illegal:{kind}" if kind else case

    def _pool_of(self, index: int) -> str | None:
        case = self.drawn_case(index)
        return case if case in self.pools else "missing_promotion" if case == "illegal:missing_promotion" else None

    def _deal(self, pool_name: str, index: int) -> Transition:
        """Item `rank` of the pool's shuffles, where `rank` counts the earlier draws from this pool."""
        while len(self._ranks) <= index:
            name = self._pool_of(len(self._ranks))
            self._ranks.append(self._dealt.get(name, 0))
            if name is not None:
                self._dealt[name] = self._ranks[-1] + 1
        pool = self.pools[pool_name]
        cycle, position = divmod(self._ranks[index], len(pool))
        key = (pool_name, cycle)
        if key not in self._shuffles:
            self._shuffles[key] = random.Random(f"{self.seed}:A:{pool_name}:{cycle}").sample(range(len(pool)), len(pool))
        return pool[self._shuffles[key][position]]

    def _on_the_fly(self, case: str, kind: str | None, rng: random.Random) -> Transition:
        for _ in range(MAX_DRAW_ATTEMPTS):
            fen, history = rng.choice(self.positions)
            board = with_seventyfive_clock(chess.Board(fen)) if case == "seventyfive_moves" else chess.Board(fen)
            if case == "illegal":
                moves = [move for move, found in illegal_moves(board, rng) if found == kind]
            else:
                moves = [move for move in board.legal_moves if legal_move_case(board, move) == case]
            if moves:
                return board.fen(), history, rng.choice(moves).uci()
        raise RuntimeError(f"no {kind or case} move in {MAX_DRAW_ATTEMPTS} random training positions")


@lru_cache(maxsize=4)
def collect_pools(positions: tuple[Position, ...], cases: tuple[str, ...], seed: int, pool_size: int,
                  pool_walks: int) -> dict[str, list[Transition]]:
    """Up to `pool_size` distinct moves per rare case, from seeded random walks of at most
    WALK_PLIES plies that start at training positions (the start included)."""
    pools: dict[str, dict[tuple[str, str], Transition]] = {case: {} for case in cases}

    def add(board: chess.Board, history: tuple[str, ...]) -> None:
        for case, move in rare_moves(board):
            pool = pools.get(case)
            if pool is not None and len(pool) < pool_size:
                fen = board.fen()
                pool.setdefault((fen, move.uci()), (fen, history, move.uci()))

    rng = random.Random(f"{seed}:A:walks")
    for _ in range(pool_walks):
        if all(len(pool) >= pool_size for pool in pools.values()):
            break
        fen, history = rng.choice(positions)
        board = chess.Board(fen)
        add(board, history)
        for _ in range(rng.randint(1, WALK_PLIES)):
            if board.is_game_over():
                break
            board.push(biased_random_move(board, rng))
            add(board, (*history, *recent_history(board))[-MAX_HISTORY:])
    return {case: sorted(pool.values()) for case, pool in pools.items()}


def stored_pools(positions: tuple[Position, ...], cases: tuple[str, ...], seed: int, pool_size: int,
                 pool_walks: int, cache_dir: str) -> dict[str, list[Transition]]:
    """collect_pools' result, read from `cache_dir` when an earlier process stored it, else collected
    and stored there."""
    path = Path(cache_dir) / f"{pools_key(positions, cases, seed, pool_size, pool_walks)}.json"
    if path.is_file():
        try:
            stored = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: unreadable stored A: pools ({error}); delete the file") from None
        return {case: [(fen, tuple(history), move) for fen, history, move in items] for case, items in stored.items()}
    pools = collect_pools(positions, cases, seed, pool_size, pool_walks)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as handle:
        json.dump(pools, handle)
    os.replace(handle.name, path)
    return pools


def pools_key(positions: tuple[Position, ...], cases: tuple[str, ...], seed: int, pool_size: int,
              pool_walks: int) -> str:
    digest = hashlib.sha256()
    for source in (Path(__file__), Path(__file__).with_name("move_cases.py")):
        digest.update(source.read_bytes() + b"\0")
    digest.update(json.dumps([chess.__version__, cases, seed, pool_size, pool_walks, WALK_PLIES]).encode() + b"\0")
    for fen, history in positions:
        digest.update(f"{fen}|{' '.join(history)}\n".encode())
    return digest.hexdigest()
