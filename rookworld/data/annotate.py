"""`python -m rookworld.data.annotate`: positions -> engine-annotated JSONL (and A: test cases).

Position sources (exactly one):
  --fens FILE       one position per line: a FEN, optionally followed by UCI moves played from it
                    (the annotated position is the one after the moves; they become its history)
  --pgn FILE        positions sampled from the games of a PGN file (history = the game's moves)
  --selfplay N      N positions from seeded Stockfish self-play with randomised move choice
                    (random opening plies, softmax over MultiPV evals, epsilon-random moves) and
                    random few-piece endgame starts; with --shards DIR at scale: --workers engine
                    processes, every analysed position kept (the label's search picks the move),
                    whole games split into train / rl / validation / test, resumable after a kill
                    (rookworld/data/shards.py)
  --relabel FILE    the positions of an annotated JSONL file, re-analysed: every field is kept
                    (fen, history, phase, source, a self-play game's index and split) but the
                    candidates and the engine fields, which are recomputed (--workers
                    engine processes; the row order is kept)
  --action-values FILE
                    the records of an annotated JSONL file, unchanged, plus the engine value of every
                    legal move ("action_values", best first, and "action_values_limit"): one
                    `searchmoves` search per move at --nodes, one thread, cleared hash; --workers
                    engine processes, resumable after a kill in the --shards folder, joined into
                    --output (rookworld/data/action_values.py)
  --arbiter N       N A: transitions for held-out evaluation, no engine: positions from --positions
                    files plus seeded random-move games; quotas in ARBITER_QUOTAS over-sample
                    terminal, illegal, castling, en-passant and promotion moves

Each output line: {"fen", "history" (last <= 10 UCI moves, oldest first), "phase", "source",
"candidates": [{"move", "eval"}] best-first (pawns, side-to-move POV), "engine", "limit"} where
"limit" is the engine limit that was set, e.g. {"nodes": 100000}.
With --heldout M, whole games (never single positions) go to --heldout-output until it holds
>= M positions, so train and held-out positions come from different games. Positions are
deduplicated by (placement, side, castling, en passant) across both outputs and the --exclude files.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable, Iterator

import chess
import chess.pgn

from rookworld.data.action_values import run_action_values
from rookworld.data.action_values import throughput_line as action_values_throughput
from rookworld.data.move_cases import (classify_position, random_endgame_board, random_game_positions, recent_history,
                                       with_seventyfive_clock)
from rookworld.data.phase import OPENING_MAX_FULLMOVE, game_phase
from rookworld.data.records import (at_line, excluded_positions, iter_jsonl, open_text, position_key, read_jsonl,
                                    write_jsonl)
from rookworld.data.selfplay import GameSettings, PlaySettings
from rookworld.data.shards import run_shards, throughput_line
from rookworld.engine import Engine, EngineNotFoundError, analyse_many, engine_config
from rookworld.interrupts import Interrupted, raise_on_signals
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


# -- CLI -------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    engine = engine_config()
    selfplay = SelfPlayConfig()
    parser = argparse.ArgumentParser(
        prog="python -m rookworld.data.annotate", description=__doc__.split("\n\n")[0]
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--fens", help="file: FEN [uci moves played from it] per line")
    source.add_argument("--pgn", help="PGN file; positions sampled at --pgn-sample-rate")
    source.add_argument("--selfplay", type=int, metavar="N", help="number of self-play positions")
    source.add_argument("--arbiter", type=int, metavar="N", help="number of A: held-out rows")
    source.add_argument("--relabel", metavar="FILE", help="annotated JSONL whose positions to re-analyse")
    source.add_argument("--action-values", metavar="FILE",
                        help="annotated JSONL whose records to write with every legal move's engine value")
    parser.add_argument("--output", help="JSONL output (.gz compresses); not with --selfplay --shards")
    parser.add_argument("--shards", metavar="DIR", help="--selfplay at scale: resumable sharded run folder, "
                        "--workers engine processes, the move choice reusing each label's search; "
                        "--action-values: the resumable run folder (blocks of --positions-per-block)")
    parser.add_argument("--positions-per-block", type=int, default=64,
                        help="--action-values: positions per block file of the --shards folder")
    parser.add_argument("--heldout", type=int, default=0, help="positions (whole games) held out")
    parser.add_argument("--heldout-output", help="JSONL output of the held-out games")
    parser.add_argument("--positions", nargs="*", default=[], help="--arbiter: annotated JSONL inputs")
    parser.add_argument("--exclude", nargs="*", default=[], help="JSONL whose positions to skip (not for --relabel)")
    parser.add_argument("--random-games", type=int, default=400, help="--arbiter: random-move games")
    parser.add_argument("--engine-path", default=engine["path"], help="default: conf/engine/stockfish.yaml")
    parser.add_argument("--depth", type=int, help="annotation depth (default: the limit in the engine yaml)")
    parser.add_argument("--nodes", type=int, help="annotation nodes per position (default: the engine yaml); "
                        "--action-values: nodes per move (required)")
    parser.add_argument("--workers", type=int, default=1,
                        help="--relabel / --shards / --action-values: engine processes, one thread each")
    parser.add_argument("--play-depth", type=int, default=6, help="self-play move-choice depth")
    parser.add_argument("--threads", type=int, default=engine["threads"])
    parser.add_argument("--hash-mb", type=int, default=engine["hash_mb"])
    parser.add_argument("--multipv", type=int, default=engine["multipv"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pgn-sample-rate", type=float, default=0.2)
    parser.add_argument("--max-positions", type=int, help="stop after this many (fens / pgn)")
    parser.add_argument("--temperature", type=float, default=selfplay.temperature, help="self-play softmax, pawns")
    parser.add_argument("--epsilon", type=float, default=selfplay.epsilon, help="self-play random-move rate")
    parser.add_argument("--record-prob", type=float, default=selfplay.record_prob, help="self-play ply keep rate")
    parser.add_argument("--opening-record-prob", type=float, default=selfplay.opening_record_prob,
                        help="keep rate, moves 1-10")
    parser.add_argument("--max-plies", type=int, default=selfplay.max_plies, help="self-play game length cap")
    parser.add_argument("--max-opening-random-plies", type=int, default=selfplay.max_opening_random_plies,
                        help="self-play: up to this many uniformly random opening plies")
    parser.add_argument("--endgame-start-fraction", type=float, default=selfplay.endgame_start_fraction,
                        help="games from random endgames")
    parser.add_argument("--resign-eval", type=float, default=selfplay.resign_eval,
                        help="pawns: lopsided-game threshold")
    parser.add_argument("--resign-plies", type=int, default=selfplay.resign_plies,
                        help="lopsided plies in a row that end a game")
    games = GameSettings()
    parser.add_argument("--games-per-shard", type=int, default=200, help="--shards: games per shard file")
    parser.add_argument("--time-limit-s", type=float, help="--shards: stop after the shard complete at this many "
                        "seconds (a time-limited job); the same command resumes")
    parser.add_argument("--validation-fraction", type=float, default=games.validation_fraction,
                        help="--shards: share of games held out for validation")
    parser.add_argument("--test-fraction", type=float, default=games.test_fraction,
                        help="--shards: share of games held out for the test")
    parser.add_argument("--rl-fraction", type=float, default=games.rl_fraction,
                        help="--shards: share of games in the RL split (never in supervised training)")
    return parser


def parse_args(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    parser = parser or build_parser()
    args = parser.parse_args(argv)
    if args.depth is not None and args.nodes is not None:
        parser.error("set at most one of --depth / --nodes")
    if args.workers < 1:
        parser.error(f"--workers {args.workers}: must be >= 1")
    if args.heldout and not args.heldout_output:
        parser.error("--heldout needs --heldout-output")
    if args.action_values is not None:
        check_action_value_args(args, parser)
    elif (args.output is None) == (args.shards is None):
        parser.error("give exactly one of --output / --shards")
    if args.shards is not None and args.selfplay is None and args.action_values is None:
        parser.error("--shards needs --selfplay N or --action-values FILE")
    if args.games_per_shard < 1:
        parser.error(f"--games-per-shard {args.games_per_shard}: must be >= 1")
    fractions = (args.validation_fraction, args.test_fraction, args.rl_fraction)
    if min(fractions) < 0 or sum(fractions) >= 1:
        parser.error(f"--validation/--test/--rl-fraction {fractions}: each >= 0, together < 1")
    if args.arbiter is not None and args.arbiter < arbiter_min_rows():
        parser.error(f"--arbiter {args.arbiter}: the case quotas need at least {arbiter_min_rows()} rows")
    return args


def check_action_value_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if args.output is None or args.shards is None:
        parser.error("--action-values needs --output FILE and --shards DIR (the resumable run folder)")
    if args.nodes is None or args.depth is not None:
        parser.error("--action-values needs --nodes N (nodes per move), not --depth")
    if args.threads != 1:
        parser.error(f"--threads {args.threads}: --action-values searches with one thread (reproducible values)")
    if args.positions_per_block < 1:
        parser.error(f"--positions-per-block {args.positions_per_block}: must be >= 1")


def selfplay_config(args: argparse.Namespace) -> SelfPlayConfig:
    """The SelfPlayConfig of the CLI flags (one flag per field, dashes for underscores)."""
    return SelfPlayConfig(**{f.name: getattr(args, f.name) for f in fields(SelfPlayConfig)})


def game_settings(args: argparse.Namespace) -> GameSettings:
    """The GameSettings of the CLI flags (one flag per field)."""
    return GameSettings(**{f.name: getattr(args, f.name) for f in fields(GameSettings)})


def run_sharded_selfplay(args: argparse.Namespace) -> None:
    """--selfplay N --shards DIR: N positions or a few more (whole shards), resumable after a kill."""
    engine_kwargs = {**engine_knobs(args), **annotation_limit(args)}
    done = run_shards(args.shards, args.selfplay, workers=args.workers, seed=args.seed,
                      games_per_shard=args.games_per_shard, settings=game_settings(args),
                      engine_kwargs=engine_kwargs, exclude=excluded_positions(args.exclude),
                      time_limit_s=args.time_limit_s)
    print(f"{args.shards}: {done['shards']} shards, by split {done.get('by_split', {})}", file=sys.stderr)
    if done["positions"] < args.selfplay:
        print(f"stopped by --time-limit-s {args.time_limit_s:g} at {done['positions']} of {args.selfplay} positions: "
              "run the same command again to go on", file=sys.stderr)
    print(throughput_line(done, args.workers), file=sys.stderr)


def run_action_value_blocks(args: argparse.Namespace) -> None:
    """--action-values FILE: its records plus every legal move's value, resumable in --shards."""
    done = run_action_values(args.action_values, args.output, args.shards, nodes=args.nodes, workers=args.workers,
                             positions_per_block=args.positions_per_block, engine_kwargs=engine_knobs(args))
    print(f"wrote {done['positions']} positions with action values to {args.output}", file=sys.stderr)
    print(action_values_throughput(done, args.workers), file=sys.stderr)


def run_arbiter(args: argparse.Namespace, rng: random.Random) -> None:
    exclude = set(excluded_positions(args.exclude))
    realistic: Positions = []
    for path in args.positions:
        for line_no, record in iter_jsonl(path):
            with at_line(path, line_no):
                realistic.append((chess.Board(record["fen"]), list(record.get("history", []))))
    rows = build_arbiter_cases(realistic, random_game_boards(rng, args.random_games), args.arbiter, rng, exclude)
    write_jsonl(args.output, rows)
    print(f"wrote {len(rows)} A: rows to {args.output}", file=sys.stderr)


def annotation_limit(args: argparse.Namespace) -> dict:
    """--depth or --nodes when given, else the limit of the engine yaml (depth / nodes / time_limit)."""
    if args.depth is not None or args.nodes is not None:
        return {"depth": args.depth, "nodes": args.nodes, "time_limit": None}
    knobs = engine_config()
    return {key: knobs[key] for key in ("depth", "nodes", "time_limit")}


def engine_knobs(args: argparse.Namespace) -> dict:
    """Engine kwargs besides the limit: the CLI flags, and the yaml for those without a flag."""
    knobs = engine_config()
    return {"path": args.engine_path, "threads": args.threads, "hash_mb": args.hash_mb, "multipv": args.multipv,
            "cache_size": knobs["cache_size"], "timeout": knobs["timeout"]}


def run_relabel(args: argparse.Namespace) -> None:
    """Same positions and rows, candidates and engine fields recomputed (row order kept)."""
    records = read_jsonl(args.relabel)
    engine_kwargs = {**engine_knobs(args), **annotation_limit(args)}
    with Engine(**engine_kwargs) as engine:
        engine_name, limit = engine.name, engine.limit_record
    progress = Progress(len(records))
    started = time.monotonic()
    analyses = analyse_many([r["fen"] for r in records], args.workers, progress.update, **engine_kwargs)
    rows = [{**r, "candidates": [{"move": c.move, "eval": c.eval} for c in candidates],
             "engine": engine_name, "limit": limit}
            for r, candidates in zip(records, analyses)]
    write_jsonl(args.output, rows)
    print(f"wrote {len(rows)} positions to {args.output} in {time.monotonic() - started:.0f}s "
          f"({args.workers} workers)", file=sys.stderr)


def run_annotation(args: argparse.Namespace, rng: random.Random) -> None:
    shared = engine_knobs(args)
    exclude = excluded_positions(args.exclude)
    engine = Engine(**annotation_limit(args), **shared)
    with engine:
        if args.selfplay is not None:
            cfg = selfplay_config(args)
            player = Engine(depth=args.play_depth, nodes=None, time_limit=None, **shared)  # --play-depth
            with player:
                samples = selfplay_samples(player, rng, cfg)
                pairs = annotate_samples(samples, engine, args.selfplay, Progress(args.selfplay), exclude)
        else:
            samples = fen_samples(args.fens) if args.fens else pgn_samples(args.pgn, rng, args.pgn_sample_rate)
            pairs = annotate_samples(samples, engine, args.max_positions, Progress(args.max_positions), exclude)
    train, held = split_by_game(pairs, args.heldout, rng)
    write_jsonl(args.output, train)
    if args.heldout_output:
        write_jsonl(args.heldout_output, held)
    print(f"wrote {len(train)} positions to {args.output}"
          + (f", {len(held)} to {args.heldout_output}" if args.heldout_output else ""), file=sys.stderr)


def run_mode(args: argparse.Namespace, rng: random.Random) -> None:
    if args.arbiter is not None:
        run_arbiter(args, rng)
    elif args.relabel is not None:
        run_relabel(args)
    elif args.action_values is not None:
        run_action_value_blocks(args)
    elif args.shards is not None:
        run_sharded_selfplay(args)
    else:
        run_annotation(args, rng)


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parse_args(argv, parser)
    raise_on_signals()
    try:
        run_mode(args, random.Random(args.seed))
    except (ValueError, RuntimeError, FileNotFoundError, EngineNotFoundError) as exc:
        parser.exit(2, f"annotate: error: {exc}\n")
    except Interrupted as stop:
        kept = f"; {args.shards} keeps what was written, and the same command goes on from there" if args.shards else ""
        parser.exit(stop.exit_code, f"annotate: {stop.stop_reason}{kept}\n")


if __name__ == "__main__":
    main()
