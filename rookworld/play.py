"""`python -m rookworld.play`: the model plays games against Stockfish at fixed node limits and against itself.

The model's move is the B: move of its completion of the prompt "P: " + FEN (greedy, or sampled with the
sampling group's settings); a move that does not parse or is illegal loses the game. Each level plays
play.games_per_level games from seeded openings (random legal plies from the start), each opening once
with either colour; the model also plays play.self_play_games games against itself. Games run in lockstep,
the model moving in all waiting games at once. Reports (printed, and logged to MLflow): the legal-move
rate, the plies before the first illegal move, the score against each level with its Wilson interval and
an Elo on the levels' scale (play.anchors) with its likelihood interval. play.mode=calibrate plays each
level against the next instead and prints the anchors (docs/play.md).

    python -m rookworld.play                                     # the shipped rookworld_tiny, on the CPU or GPU
    python -m rookworld.play model.path=CHECKPOINT play.games_per_level=100
    python -m rookworld.play play.mode=calibrate play.games_per_level=200 tracking=none
"""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field

import chess
import hydra
import numpy as np
import torch
from omegaconf import DictConfig
from tqdm import tqdm

from rookworld.run.build import load_policy
from rookworld.app.composition import run_hydra_main
from rookworld.app.config import PROJECT_TARGETS, load_play
from rookworld.stockfish.engine import Engine
from rookworld.app.errors import as_command
from rookworld.app.hooks import run_link
from rookworld.model.fast_sampling import make_decoder
from rookworld.model.precision import autocast_for
from rookworld.outcomes import SUCCESS
from rookworld.judge.rollout import decode_generation, generate_for_prompts
from rookworld.specs.play import PlaySpec
from rookworld.specs.rules import resolve_device
from rookworld.tasks import parse_policy, policy_prompt
from rookworld.tracking import make_tracker

Z95 = 1.959963984540054   # the two-sided 95% normal quantile
LIKELIHOOD_DROP = 1.920729  # half the 95% chi-square(1) quantile: the likelihood interval's edge
ELO_MARGIN = 1000           # the Elo fit searches the anchors' range widened by this on both sides


# ---- players -------------------------------------------------------------------------------------

class EnginePlayer:
    """Stockfish at a fixed node limit, one thread, hash cleared before each move (rookworld.stockfish.engine)."""

    def __init__(self, nodes: int, path: str, hash_mb: int):
        self.name, self.nodes = f"nodes_{nodes}", nodes
        self.engine = Engine(path=path, nodes=nodes, threads=1, hash_mb=hash_mb, multipv=1)

    def moves(self, boards: list[chess.Board]) -> list[str | None]:
        return [self.engine.analyse(board.fen())[0].move for board in boards]

    def close(self) -> None:
        self.engine.close()


class ModelPlayer:
    """The B: move of the model's P: completion for each position, `batch_size` positions at a time."""

    def __init__(self, decoder, tokenizer, max_new_tokens: int, greedy: bool, sampling, batch_size: int,
                 generator: torch.Generator, autocast):
        self.name = "model"
        self.decoder, self.tokenizer, self.max_new_tokens = decoder, tokenizer, max_new_tokens
        self.greedy, self.sampling, self.batch_size = greedy, sampling, batch_size
        self.generator, self.autocast = generator, autocast

    def moves(self, boards: list[chess.Board]) -> list[str | None]:
        out = []
        for start in range(0, len(boards), self.batch_size):
            chunk = boards[start:start + self.batch_size]
            prompts = [[self.tokenizer.eos_id] + self.tokenizer.encode(policy_prompt(b.fen())) for b in chunk]
            s = self.sampling
            with torch.no_grad(), self.autocast():
                generation = generate_for_prompts(self.decoder, self.tokenizer, prompts, [self.max_new_tokens] * len(chunk),
                                                  greedy=self.greedy, temperature=s.temperature, top_k=s.top_k,
                                                  top_p=s.top_p, generator=self.generator)
            for text in decode_generation(self.tokenizer, generation):
                answer = parse_policy(text)
                out.append(answer.best_move if answer is not None else None)
        return out


# ---- games ---------------------------------------------------------------------------------------

@dataclass
class Game:
    """One game from an opening. `subject` is the side whose score is recorded (None: self-play, scored for
    neither); a move that does not parse or is illegal loses the game for the side that made it."""
    white: object
    black: object
    opening: tuple[str, ...]
    label: str
    subject: chess.Color | None
    max_plies: int
    board: chess.Board = field(init=False)
    result: str | None = None
    reason: str = ""
    legal_moves: dict[str, int] = field(default_factory=dict)  # legal moves made, by player name
    illegal_by: str | None = None  # the player whose move was illegal

    def __post_init__(self):
        self.board = chess.Board()
        for move in self.opening:
            self.board.push_uci(move)

    @property
    def to_move(self):
        return self.white if self.board.turn == chess.WHITE else self.black

    @property
    def plies(self) -> int:
        """Plies played after the opening."""
        return len(self.board.move_stack) - len(self.opening)

    def play(self, move: str | None) -> None:
        player, turn = self.to_move, self.board.turn
        parsed = _parse_move(move)
        if parsed is None or parsed not in self.board.legal_moves:
            self.illegal_by = player.name
            self._end("0-1" if turn == chess.WHITE else "1-0", f"illegal move {move!r} by {player.name}")
            return
        self.board.push(parsed)
        self.legal_moves[player.name] = self.legal_moves.get(player.name, 0) + 1
        outcome = self.board.outcome(claim_draw=True)
        if outcome is not None:
            self._end(outcome.result(), outcome.termination.name.lower())
        elif self.plies >= self.max_plies:
            self._end("1/2-1/2", "max_plies")

    def _end(self, result: str, reason: str) -> None:
        self.result, self.reason = result, reason

    @property
    def score(self) -> float | None:
        """The subject's points: 1 win, 0.5 draw, 0 loss (None for self-play or a game still running)."""
        if self.result is None or self.subject is None:
            return None
        points = {"1-0": 1.0, "0-1": 0.0, "1/2-1/2": 0.5}[self.result]
        return points if self.subject == chess.WHITE else 1.0 - points

    def record(self) -> dict:
        return {"label": self.label, "white": self.white.name, "black": self.black.name,
                "opening": list(self.opening), "moves": [m.uci() for m in self.board.move_stack[len(self.opening):]],
                "result": self.result, "reason": self.reason, "score": self.score}


def _parse_move(move: str | None) -> chess.Move | None:
    try:
        return chess.Move.from_uci(move) if move else None
    except ValueError:
        return None


def play_games(games: list[Game], progress=None) -> None:
    """Play every game to its end: each round, each player moves in all the games waiting for it at once."""
    active = [g for g in games if g.result is None]
    while active:
        waiting: dict[int, tuple[object, list[Game]]] = {}
        for game in active:
            waiting.setdefault(id(game.to_move), (game.to_move, []))[1].append(game)
        for player, its_games in waiting.values():
            for game, move in zip(its_games, player.moves([g.board for g in its_games])):
                game.play(move)
                if game.result is not None and progress is not None:
                    progress.update(1)
        active = [g for g in active if g.result is None]


def openings(count: int, plies: int, seed: int) -> list[tuple[str, ...]]:
    """`count` distinct openings of `plies` random legal plies from the start position (none ends the game)."""
    rng, found = random.Random(seed), []
    for _ in range(1000 * count + 1000):
        if len(found) == count:
            return found
        board = chess.Board()
        for _ in range(plies):
            board.push(rng.choice(list(board.legal_moves)))
            if board.is_game_over():
                break
        line = tuple(m.uci() for m in board.move_stack)
        if not board.is_game_over() and line not in found:
            found.append(line)
    raise ValueError(f"play.opening_plies={plies} gives fewer than {count} distinct openings")


def level_games(subject, opponent, lines: list[tuple[str, ...]], label: str, max_plies: int) -> list[Game]:
    """Each opening twice: the subject with White, then with Black."""
    return [game for line in lines for game in (
        Game(subject, opponent, line, label, chess.WHITE, max_plies),
        Game(opponent, subject, line, label, chess.BLACK, max_plies))]


# ---- statistics ----------------------------------------------------------------------------------

def wilson_interval(points: float, games: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a score (points / games; a draw counts as half a win)."""
    if games == 0:
        return 0.0, 1.0
    p, z2 = points / games, Z95 ** 2
    centre = (p + z2 / (2 * games)) / (1 + z2 / games)
    half = Z95 / (1 + z2 / games) * math.sqrt(p * (1 - p) / games + z2 / (4 * games ** 2))
    return max(0.0, centre - half), min(1.0, centre + half)


def fit_elo(opponents: list[float], scores: list[float]) -> tuple[float, float, float]:
    """Maximum-likelihood Elo of a player from its games' scores against opponents of known Elo under the
    logistic model E = 1 / (1 + 10^((opponent - R) / 400)) (a draw counts as half a win), with the 95%
    likelihood-ratio interval; on a 1-Elo grid over the opponents' range widened by ELO_MARGIN, so a
    player who lost (or won) every game gets the grid's edge and a one-sided interval."""
    rating = np.arange(min(opponents) - ELO_MARGIN, max(opponents) + ELO_MARGIN + 1, 1.0)
    expected = 1.0 / (1.0 + 10.0 ** ((np.asarray(opponents)[None, :] - rating[:, None]) / 400.0))
    s = np.asarray(scores)[None, :]
    loglik = (s * np.log(expected) + (1 - s) * np.log1p(-expected)).sum(axis=1)
    best = int(loglik.argmax())
    inside = rating[loglik >= loglik[best] - LIKELIHOOD_DROP]
    return float(rating[best]), float(inside.min()), float(inside.max())


def level_metrics(games: list[Game], prefix: str) -> dict[str, float]:
    scores = [g.score for g in games]
    points = sum(scores)
    low, high = wilson_interval(points, len(scores))
    return {f"{prefix}/score": points / len(scores), f"{prefix}/score_lo": low, f"{prefix}/score_hi": high,
            f"{prefix}/games": float(len(scores)), f"{prefix}/wins": float(sum(s == 1.0 for s in scores)),
            f"{prefix}/draws": float(sum(s == 0.5 for s in scores)), f"{prefix}/losses": float(sum(s == 0.0 for s in scores))}


def model_metrics(games: list[Game], self_games: list[Game], anchors: dict[int, float],
                  levels: dict[str, int]) -> dict[str, float]:
    """play/* metrics of the model's games (docs/play.md)."""
    everything = games + self_games
    legal = sum(g.legal_moves.get("model", 0) for g in everything)
    illegal = sum(g.illegal_by == "model" for g in everything)
    metrics = {"play/games": float(len(everything)), "play/model_moves": float(legal + illegal),
               "play/legal_move_rate": legal / (legal + illegal) if legal + illegal else 0.0,
               "play/illegal_loss_share": illegal / len(everything)}
    if games:
        metrics["play/plies_before_illegal"] = float(np.mean([g.legal_moves.get("model", 0) for g in games]))
    if self_games:
        metrics["play/self/legal_plies"] = float(np.mean([g.plies for g in self_games]))
        metrics["play/self/illegal_share"] = sum(g.illegal_by is not None for g in self_games) / len(self_games)
    for label, nodes in levels.items():
        metrics.update(level_metrics([g for g in games if g.label == label], f"play/{label}"))
    if games:
        elo, low, high = fit_elo([anchors[levels[g.label]] for g in games], [g.score for g in games])
        metrics.update({"play/elo": elo, "play/elo_lo": low, "play/elo_hi": high})
    return metrics


# ---- the command ---------------------------------------------------------------------------------

def play_model(spec: PlaySpec, model, tokenizer, device: torch.device, progress: bool = True) -> tuple[dict, list[Game]]:
    p = spec.play
    generator = torch.Generator(device=device).manual_seed(spec.seed)
    model_player = ModelPlayer(make_decoder(model, check_every=spec.sampling.finish_check_every), tokenizer,
                               int(spec.sampling.max_new_tokens["P"]), p.greedy, spec.sampling, p.batch_size,
                               generator, lambda: autocast_for(device, spec.model.dtype))
    lines = openings(max(p.games_per_level // 2, p.self_play_games), p.opening_plies, spec.seed)
    engines = [EnginePlayer(nodes, p.engine_path, p.engine_hash_mb) for nodes in p.levels]
    try:
        games = [g for engine in engines
                 for g in level_games(model_player, engine, lines[: p.games_per_level // 2], engine.name, p.max_plies)]
        self_games = [Game(model_player, model_player, line, "self", None, p.max_plies)
                      for line in lines[: p.self_play_games]]
        with tqdm(total=len(games) + len(self_games), desc="games", disable=not progress, smoothing=0) as bar:
            play_games(games + self_games, bar)
    finally:
        for engine in engines:
            engine.close()
    levels = {engine.name: engine.nodes for engine in engines}
    return model_metrics(games, self_games, dict(p.anchors), levels), games + self_games


def calibrate(spec: PlaySpec, progress: bool = True) -> tuple[dict, list[Game]]:
    """Each level against the next (play.games_per_level games from the same openings, colours swapped); the
    Elo of each level against the one below, chained from the first level at 0."""
    p = spec.play
    lines = openings(p.games_per_level // 2, p.opening_plies, spec.seed)
    engines = [EnginePlayer(nodes, p.engine_path, p.engine_hash_mb) for nodes in p.levels]
    try:
        pairs = list(zip(engines, engines[1:]))
        games = [g for weaker, stronger in pairs
                 for g in level_games(stronger, weaker, lines, f"{stronger.name}_vs_{weaker.name}", p.max_plies)]
        with tqdm(total=len(games), desc="games", disable=not progress, smoothing=0) as bar:
            play_games(games, bar)
    finally:
        for engine in engines:
            engine.close()
    metrics, anchor = {f"calibrate/{engines[0].name}/elo": 0.0}, 0.0
    for weaker, stronger in pairs:
        label = f"{stronger.name}_vs_{weaker.name}"
        pair = [g for g in games if g.label == label]
        gap, low, high = fit_elo([0.0] * len(pair), [g.score for g in pair])
        anchor += gap
        metrics.update(level_metrics(pair, f"calibrate/{label}"))
        metrics.update({f"calibrate/{label}/elo_gap": gap, f"calibrate/{label}/elo_gap_lo": low,
                        f"calibrate/{label}/elo_gap_hi": high, f"calibrate/{stronger.name}/elo": anchor})
    return metrics, games


def summary(spec: PlaySpec, metrics: dict[str, float]) -> list[str]:
    p = spec.play
    if p.mode == "calibrate":
        lines = ["level | against | score (95% Wilson) | Elo gap (95% likelihood) | anchor"]
        for weaker, stronger in zip(p.levels, p.levels[1:]):
            k = f"calibrate/nodes_{stronger}_vs_nodes_{weaker}"
            lines.append(f"nodes {stronger} | nodes {weaker} | {metrics[k + '/score']:.3f} ({metrics[k + '/score_lo']:.3f}"
                         f"..{metrics[k + '/score_hi']:.3f}) | {metrics[k + '/elo_gap']:+.0f} ({metrics[k + '/elo_gap_lo']:+.0f}"
                         f"..{metrics[k + '/elo_gap_hi']:+.0f}) | {metrics[f'calibrate/nodes_{stronger}/elo']:.0f}")
        return lines
    lines = [f"legal-move rate {metrics['play/legal_move_rate']:.3f} over {metrics['play/model_moves']:.0f} model moves; "
             f"{metrics['play/illegal_loss_share']:.3f} of {metrics['play/games']:.0f} games ended by its illegal move"]
    if "play/plies_before_illegal" in metrics:
        lines.append(f"against the engine: {metrics['play/plies_before_illegal']:.1f} model plies per game before an "
                     "illegal move or the game's end")
    if "play/self/legal_plies" in metrics:
        lines.append(f"self-play: {metrics['play/self/legal_plies']:.1f} legal plies per game after the opening")
    for nodes in p.levels:
        k = f"play/nodes_{nodes}"
        lines.append(f"against {nodes} nodes (Elo {p.anchors[nodes]:.0f}): score {metrics[k + '/score']:.3f} "
                     f"(95% {metrics[k + '/score_lo']:.3f}..{metrics[k + '/score_hi']:.3f}; +{metrics[k + '/wins']:.0f} "
                     f"={metrics[k + '/draws']:.0f} -{metrics[k + '/losses']:.0f})")
    if "play/elo" in metrics:
        played = [p.anchors[nodes] for nodes in p.levels]
        low, high = min(played) - ELO_MARGIN, max(played) + ELO_MARGIN
        edge = " (the fit's edge: below every level)" if metrics["play/elo"] <= low else \
            " (the fit's edge: above every level)" if metrics["play/elo"] >= high else ""
        lines.append(f"Elo {metrics['play/elo']:.0f} (95% {metrics['play/elo_lo']:.0f}..{metrics['play/elo_hi']:.0f}) "
                     f"on the levels' scale{edge}")
    return lines


def run(cfg: DictConfig, progress: bool = True) -> dict[str, float]:
    spec = load_play(cfg)
    device = resolve_device(spec.device)
    if device.type == "cpu" and spec.cpu_threads is not None:
        torch.set_num_threads(spec.cpu_threads)
    with make_tracker(cfg, run_link(cfg)) as tracker:
        tracker.log_params(cfg)
        tracker.log_config_yaml(cfg)
        if spec.play.mode == "calibrate":
            metrics, games = calibrate(spec, progress)
        else:
            model, tokenizer = load_policy(spec.model, device)
            model.eval()
            metrics, games = play_model(spec, model, tokenizer, device, progress)
        tracker.log_metrics(metrics, step=0)
        tracker.log_dict({"games": [g.record() for g in games]}, "games.json")
        tracker.log_dict(metrics, "play.json")
        for line in summary(spec, metrics):
            print(line, flush=True)
        print("metrics " + json.dumps(metrics, sort_keys=True), flush=True)
        tracker.set_outcome(SUCCESS, f"played {len(games)} games")
    return metrics


@hydra.main(config_path="../conf", config_name="play", execution_whitelist=PROJECT_TARGETS)
def main(cfg: DictConfig) -> None:
    with as_command():
        run(cfg)


if __name__ == "__main__":
    run_hydra_main(main, "play")
