"""Engine annotation of positions, the library of `python -m rookworld.commands.annotate`: position
sources (FEN lines, PGN games, Stockfish self-play with a separate move-choice search), their engine
records, the split of whole games into train and held-out, and the A: held-out cases (quotas in
ARBITER_QUOTAS over-sample terminal, illegal, castling, en-passant and promotion moves)."""

from __future__ import annotations

import math
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import chess
import chess.pgn

from rookworld.data.move_cases import (classify_position, random_endgame_board, random_game_positions, recent_history,
                                       with_seventyfive_clock)
from rookworld.data.phase import OPENING_MAX_FULLMOVE, game_phase
from rookworld.data.records import at_line, open_text, position_key
from rookworld.data.selfplay import PlaySettings
from rookworld.stockfish.engine import Engine
from rookworld.tasks.arbiter import MAX_HISTORY


@dataclass
class Sample:
    """A position to annotate; `game` groups positions for the train/held-out split."""

    board: chess.Board
    source: str
    game: int


# -- position sources ------------------------------------------------------------------------------


def fen_samples(path: str) -> Iterator[Sample]:
    with open_text(path) as f:
        for line_no, line in enumerate(f, 1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            if len(fields) < 6:
                raise ValueError(f"{path}:{line_no}: expected a 6-field FEN, got {line.strip()!r}")
            with at_line(path, line_no):
                board = chess.Board(" ".join(fields[:6]))
                for uci in fields[6:]:
                    move = chess.Move.from_uci(uci)
                    if move not in board.legal_moves:
                        raise ValueError(f"illegal move {uci!r} in {board.fen()!r}")
                    board.push(move)
            yield Sample(board, f"fens:{Path(path).name}", line_no)


def pgn_samples(path: str, rng: random.Random, sample_rate: float) -> Iterator[Sample]:
    with open_text(path) as f:
        game_no = 0
        while (game := chess.pgn.read_game(f)) is not None:
            game_no += 1
            board = game.board()
            for move in game.mainline_moves():
                board.push(move)
                if not board.is_game_over() and rng.random() < sample_rate:
                    yield Sample(board.copy(), f"pgn:{Path(path).name}", game_no)


@dataclass(frozen=True)
class SelfPlayConfig(PlaySettings):
    """Self-play with a separate move-choice search (--play-depth): only some positions are labelled."""
    record_prob: float = 0.2  # chance that a ply's position is kept
    opening_record_prob: float = 0.4  # the same before move OPENING_MAX_FULLMOVE (many repeat)


def choose_move(
    board: chess.Board, player: Engine, rng: random.Random, cfg: SelfPlayConfig
) -> tuple[chess.Move, float | None]:
    """The move to play and the player's best eval (None for an epsilon-random move)."""
    if rng.random() < cfg.epsilon:
        return rng.choice(list(board.legal_moves)), None
    candidates = player.analyse(board.fen())
    top = max(c.eval for c in candidates)
    weights = [math.exp((c.eval - top) / cfg.temperature) for c in candidates]
    return chess.Move.from_uci(rng.choices(candidates, weights)[0].move), top


def selfplay_game(
    player: Engine, rng: random.Random, cfg: SelfPlayConfig, game: int
) -> Iterator[Sample]:
    from_endgame = rng.random() < cfg.endgame_start_fraction
    board = random_endgame_board(rng) if from_endgame else chess.Board()
    source = "selfplay-endgame" if from_endgame else "selfplay"
    random_plies = 0 if from_endgame else rng.randint(0, cfg.max_opening_random_plies)
    lopsided = 0
    for ply in range(cfg.max_plies):
        if board.is_game_over(claim_draw=True) or lopsided >= cfg.resign_plies:
            return
        keep = cfg.opening_record_prob if board.fullmove_number <= OPENING_MAX_FULLMOVE else cfg.record_prob
        if ply >= random_plies and rng.random() < keep:
            yield Sample(board.copy(), source, game)
        if ply < random_plies:
            board.push(rng.choice(list(board.legal_moves)))
            continue
        move, top = choose_move(board, player, rng, cfg)
        if top is not None:
            lopsided = lopsided + 1 if abs(top) >= cfg.resign_eval else 0
        board.push(move)


def selfplay_samples(player: Engine, rng: random.Random, cfg: SelfPlayConfig) -> Iterator[Sample]:
    game = 0
    while True:
        game += 1
        yield from selfplay_game(player, rng, cfg, game)


# -- annotation ------------------------------------------------------------------------------------


def annotation_record(sample: Sample, engine: Engine, engine_name: str) -> dict:
    board = sample.board
    candidates = engine.analyse(board.fen())
    return {
        "fen": board.fen(),
        "history": recent_history(board),
        "phase": game_phase(board),
        "source": sample.source,
        "candidates": [{"move": c.move, "eval": c.eval} for c in candidates],
        "engine": engine_name,
        "limit": engine.limit_record,
    }


class Progress:
    """Rate and ETA lines on stderr, at most every `every` seconds."""

    def __init__(self, total: int | None, every: float = 10.0) -> None:
        self.total, self.every = total, every
        self.start = self.last = time.monotonic()

    def update(self, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < self.every:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        eta = f", ETA {(self.total - done) / rate:.0f}s" if self.total and rate > 0 else ""
        total = f"/{self.total}" if self.total else ""
        print(f"annotated {done}{total} positions, {rate:.1f} pos/s{eta}", file=sys.stderr, flush=True)


def annotate_samples(
    samples: Iterable[Sample], engine: Engine, limit: int | None, progress: Progress,
    exclude: frozenset[str] = frozenset(),
) -> list[tuple[int, dict]]:
    """(game, record) pairs for unique, unfinished positions not in `exclude` (position keys), up to
    `limit` of them."""
    engine_name = engine.name
    seen: set[str] = set(exclude)
    out: list[tuple[int, dict]] = []
    for sample in samples:
        if limit is not None and len(out) >= limit:
            break
        key = position_key(sample.board.fen())
        if key in seen or sample.board.is_game_over():
            continue
        seen.add(key)
        out.append((sample.game, annotation_record(sample, engine, engine_name)))
        progress.update(len(out))
    progress.update(len(out), force=True)
    return out


def split_by_game(
    pairs: list[tuple[int, dict]], heldout: int, rng: random.Random
) -> tuple[list[dict], list[dict]]:
    """Whole games go to held-out (in random order) until it has >= `heldout` positions."""
    sizes = Counter(game for game, _ in pairs)
    games = sorted(sizes)
    rng.shuffle(games)
    chosen: set[int] = set()
    count = 0
    for game in games:
        if count >= heldout:
            break
        chosen.add(game)
        count += sizes[game]
    train = [rec for game, rec in pairs if game not in chosen]
    held = [rec for game, rec in pairs if game in chosen]
    return train, held


# -- A: held-out cases (python-chess only) ---------------------------------------------------------

ARBITER_QUOTAS = {  # fractions of --arbiter N; "normal" takes the rest
    "checkmate": 0.10,
    "stalemate": 0.05,
    "insufficient": 0.05,
    "seventyfive_moves": 0.01,
    "illegal": 0.20,
    "castling": 0.07,
    "en_passant": 0.07,
    "promotion": 0.07,
}


def arbiter_wants(n: int) -> dict[str, int]:
    """Rows per case for n A: rows: each quota rounded up, "normal" the rest (negative if n is too small)."""
    wants = {case: math.ceil(fraction * n) for case, fraction in ARBITER_QUOTAS.items()}
    wants["normal"] = n - sum(wants.values())
    return wants


def arbiter_min_rows() -> int:
    """The smallest n from which on every n leaves "normal" >= 0. Each rounded-up quota adds < 1, so
    every n >= len(quotas) / (1 - sum(quotas)) is fine and only smaller n need checking."""
    bound = math.ceil(len(ARBITER_QUOTAS) / (1.0 - sum(ARBITER_QUOTAS.values())))
    return 1 + max((n for n in range(1, bound + 1) if arbiter_wants(n)["normal"] < 0), default=0)


def arbiter_row(
    board: chess.Board, history: list[str], move: chess.Move, case: str, detail: str, source: str
) -> dict:
    return {
        "fen": board.fen(),
        "history_before": history[-MAX_HISTORY:],
        "move": move.uci(),
        "case": case,
        "detail": detail,
        "source": source,
    }


Positions = list[tuple[chess.Board, list[str]]]  # (board, history before it)


def case_pools(positions: Positions, rng: random.Random, exclude: set[str], source: str) -> dict[str, list[dict]]:
    """One random row per (position, case), grouped by case."""
    pools: dict[str, list[dict]] = {}
    for board, history in positions:
        if position_key(board.fen()) in exclude or board.is_game_over():
            continue
        variants = [(board, None)]
        if rng.random() < 0.02:
            variants.append((with_seventyfive_clock(board), "seventyfive_moves"))
        for variant, only in variants:
            for case, options in classify_position(variant, rng).items():
                if only is None or case == only:
                    move, detail = rng.choice(options)
                    row = arbiter_row(variant, history, move, case.split(":")[0], detail, source)
                    pools.setdefault(case, []).append(row)
    return pools


def take_rows(pools: dict[str, list[dict]], case: str, want: int, rng: random.Random) -> list[dict]:
    """Up to `want` rows of `case`; illegal rows spread as evenly as possible over the kinds."""
    if case != "illegal":
        pool = pools.get(case, [])
        return rng.sample(pool, min(want, len(pool)))
    kinds = {key: rng.sample(rows, len(rows)) for key, rows in pools.items() if key.startswith("illegal:")}
    taken: list[dict] = []
    while len(taken) < want and any(kinds.values()):
        for key in sorted(kinds):
            if kinds[key] and len(taken) < want:
                taken.append(kinds[key].pop())
    return taken


def build_arbiter_cases(
    realistic: Positions, synthetic: Positions, n: int, rng: random.Random, exclude: set[str]
) -> list[dict]:
    """n A: rows over-sampling terminal, illegal and special moves (quotas in ARBITER_QUOTAS).
    Each case is filled from the realistic (game) positions first, then from the synthetic ones."""
    pool_sets = [case_pools(realistic, rng, exclude, "selfplay"), case_pools(synthetic, rng, exclude, "random-game")]
    wants = arbiter_wants(n)
    if wants["normal"] < 0:
        raise ValueError(f"{n} A: rows cannot meet the case quotas; at least {arbiter_min_rows()} needed")
    rows: list[dict] = []
    for case, want in wants.items():
        taken: list[dict] = []
        for pools in pool_sets:
            taken += take_rows(pools, case, want - len(taken), rng)
        if len(taken) < want:
            raise RuntimeError(f"only {len(taken)} {case!r} moves found, need {want}: add positions")
        rows += taken
    rng.shuffle(rows)
    return rows


def random_game_boards(rng: random.Random, n_games: int) -> Positions:
    """Positions of seeded random-move games, with the moves that led to them."""
    return [(board.copy(stack=False), recent_history(board)) for board in random_game_positions(rng, n_games)]
