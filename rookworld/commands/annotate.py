"""`python -m rookworld.commands.annotate`: positions -> engine-annotated JSONL (and A: test cases).

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
import random
import sys
import time
from dataclasses import fields

import chess

from rookworld.data.action_values import run_action_values
from rookworld.data.action_values import throughput_line as action_values_throughput
from rookworld.data.annotation import (Positions, Progress, SelfPlayConfig, annotate_samples, arbiter_min_rows,
                                       build_arbiter_cases, fen_samples, pgn_samples, random_game_boards,
                                       selfplay_samples, split_by_game)
from rookworld.data.records import at_line, excluded_positions, iter_jsonl, read_jsonl, write_jsonl
from rookworld.data.selfplay import GameSettings
from rookworld.data.shards import run_shards, throughput_line
from rookworld.stockfish.engine import Engine, EngineNotFoundError, analyse_many, engine_config
from rookworld.interrupts import Interrupted, raise_on_signals


def build_parser() -> argparse.ArgumentParser:
    engine = engine_config()
    selfplay = SelfPlayConfig()
    parser = argparse.ArgumentParser(
        prog="python -m rookworld.commands.annotate", description=__doc__.split("\n\n")[0]
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
    add_setting_flags(parser, selfplay, SELFPLAY_FLAGS)
    parser.add_argument("--games-per-shard", type=int, default=200, help="--shards: games per shard file")
    parser.add_argument("--time-limit-s", type=float, help="--shards: stop after the shard complete at this many "
                        "seconds (a time-limited job; the progress bar then counts positions, no total); the same command resumes")
    add_setting_flags(parser, GameSettings(), SPLIT_FLAGS)
    return parser


SELFPLAY_FLAGS = {  # a self-play setting (SelfPlayConfig's field) -> its flag's help
    "temperature": "self-play softmax, pawns",
    "epsilon": "self-play random-move rate",
    "record_prob": "self-play ply keep rate",
    "opening_record_prob": "keep rate, moves 1-10",
    "max_plies": "self-play game length cap",
    "max_opening_random_plies": "self-play: up to this many uniformly random opening plies",
    "endgame_start_fraction": "games from random endgames",
    "resign_eval": "pawns: lopsided-game threshold",
    "resign_plies": "lopsided plies in a row that end a game",
}
SPLIT_FLAGS = {  # GameSettings' split shares -> their flags' help
    "validation_fraction": "--shards: share of games held out for validation",
    "test_fraction": "--shards: share of games held out for the test",
    "rl_fraction": "--shards: share of games in the RL split (never in supervised training)",
}


def add_setting_flags(parser: argparse.ArgumentParser, settings, helps: dict[str, str]) -> None:
    """One --flag-name per setting field, typed and defaulted by the settings object's value."""
    for field, help_text in helps.items():
        default = getattr(settings, field)
        parser.add_argument("--" + field.replace("_", "-"), type=type(default), default=default, help=help_text)


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
