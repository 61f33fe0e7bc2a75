"""`python -m rookworld.play`: games against Stockfish at fixed node limits and against itself (docs/play.md),
with real python-chess, a real Stockfish at 1 node, the shipped rookworld_tiny and a real sqlite MLflow store."""
import chess
import pytest
from hydra import compose, initialize_config_dir
from mlflow import MlflowClient

from rookworld.app.config import load_play
from rookworld.specs.rules import ConfigError
from rookworld.play import (EnginePlayer, Game, fit_elo, level_games, model_metrics, openings, play_games, run, summary,
                            wilson_interval)
from train_helpers import CONF_DIR

STOCKFISH = "/usr/games/stockfish"


class Scripted:
    """A player that plays `script` in order (None: an unparsable answer), then the first legal move."""

    def __init__(self, name: str, script: list[str | None]):
        self.name, self.script = name, list(script)

    def moves(self, boards):
        return [self.script.pop(0) if self.script else next(iter(b.legal_moves)).uci() for b in boards]


@pytest.fixture
def engine():
    player = EnginePlayer(1, STOCKFISH, 16)
    yield player
    player.close()


@pytest.mark.parametrize("planted", ["e2e5", "a1a1", None, "xyz"])
def test_an_illegal_or_unparsable_move_loses_the_game_for_the_side_that_made_it(engine, planted):
    games = [Game(Scripted("model", ["e2e4", "g1f3", planted]), engine, (), "nodes_1", chess.WHITE, 40),
             Game(engine, Scripted("model", ["e7e5", "g8f6", planted]), (), "nodes_1", chess.BLACK, 40)]
    play_games(games)
    as_white, as_black = games
    assert (as_white.result, as_white.illegal_by, as_white.legal_moves["model"]) == ("0-1", "model", 2)
    assert as_white.reason == f"illegal move {planted!r} by model" and as_white.score == 0.0
    assert as_white.plies == 4 and len(as_white.board.move_stack) == 4
    assert (as_black.result, as_black.illegal_by, as_black.legal_moves["model"]) == ("1-0", "model", 2)
    assert as_black.score == 0.0 and as_black.plies == 5


def test_engine_levels_are_reproducible_and_games_end_by_the_rules(engine):
    lines = openings(3, 6, seed=1)
    first = level_games(Scripted("a", []), engine, lines, "nodes_1", max_plies=30)
    again = level_games(Scripted("a", []), EnginePlayer(1, STOCKFISH, 16), lines, "nodes_1", max_plies=30)
    play_games(first)
    play_games(again)
    assert [g.record() for g in first] == [g.record() for g in again]
    for game in first:
        assert game.result in ("1-0", "0-1", "1/2-1/2") and game.plies <= 30
        assert game.reason == "max_plies" or game.board.outcome(claim_draw=True) is not None


def test_openings_are_seeded_distinct_and_leave_the_game_running():
    lines = openings(20, 6, seed=0)
    assert lines == openings(20, 6, seed=0) != openings(20, 6, seed=1)
    assert len(set(lines)) == 20 and all(len(line) == 6 for line in lines)
    for line in lines:
        board = chess.Board()
        for move in line:
            board.push_uci(move)
        assert not board.is_game_over()


def test_the_score_interval_and_the_elo_fit():
    low, high = wilson_interval(0, 20)
    assert low == 0.0 and high == pytest.approx(0.16113, abs=1e-5)
    assert wilson_interval(10, 20) == pytest.approx((0.29930, 0.70070), abs=1e-5)
    # 2 ln E + 2 ln(1 - E) falls by 1.92 at E = 0.10715: R = -400 log10(1 / E - 1) = -368
    assert fit_elo([0.0] * 4, [1.0, 0.0, 0.5, 0.5]) == (0.0, -368.0, 368.0)
    elo, _, high = fit_elo([0.0, 400.0], [0.0, 0.0])  # lost every game: the grid's lower edge, one-sided
    assert elo == -1000.0 and -1000.0 < high < 400.0
    elo, low, high = fit_elo([0.0] * 10, [1.0] * 7 + [0.0] * 3)  # 70%: 400 log10(7/3) = 147
    assert elo == 147.0 and low < 147.0 < high


def play_config(tmp_path, *overrides):
    with initialize_config_dir(config_dir=CONF_DIR):
        return compose("play", overrides=["model=rookworld_tiny", "device=cpu", "play.levels=[1]",
                                          "play.games_per_level=2", "play.self_play_games=1", "play.max_plies=2",
                                          f"play.engine_path={STOCKFISH}", *overrides])


def test_the_shipped_model_plays_short_games_and_the_counts_add_up(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg = play_config(tmp_path, "tracking=mlflow", f"tracking.uri={uri}", "tracking.experiment=tests",
                      f"hydra.run.dir={tmp_path}")
    metrics = run(cfg, progress=False)
    assert metrics["play/games"] == 3
    level = {k: metrics[f"play/nodes_1/{k}"] for k in ("games", "wins", "draws", "losses")}
    assert level["games"] == 2 == level["wins"] + level["draws"] + level["losses"]
    assert 0.0 <= metrics["play/nodes_1/score_lo"] <= metrics["play/nodes_1/score"] <= metrics["play/nodes_1/score_hi"]
    assert metrics["play/model_moves"] >= 3 and 0.0 <= metrics["play/legal_move_rate"] <= 1.0
    illegal_games = round(metrics["play/illegal_loss_share"] * 3)
    legal_moves = round(metrics["play/legal_move_rate"] * metrics["play/model_moves"])
    assert metrics["play/model_moves"] - legal_moves == illegal_games  # an illegal move ends its game
    assert metrics["play/elo_lo"] <= metrics["play/elo"] <= metrics["play/elo_hi"]
    client = MlflowClient(uri)
    (logged,) = client.search_runs([client.get_experiment_by_name("tests").experiment_id])
    assert logged.data.metrics["play/legal_move_rate"] == pytest.approx(metrics["play/legal_move_rate"])
    assert {a.path for a in client.list_artifacts(logged.info.run_id)} >= {"games.json", "play.json"}


def test_a_level_without_an_anchor_fails_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"play.anchors=.*has no Elo for the level\(s\) \[5\]"):
        load_play(play_config(tmp_path, "play.levels=[1,5]", "tracking=none"))


def test_a_model_that_loses_every_game_is_reported_below_every_level(tmp_path, engine):
    spec = load_play(play_config(tmp_path, "tracking=none"))
    games = level_games(Scripted("model", [None] * 4), engine, openings(2, 6, seed=0), "nodes_1", 10)
    play_games(games)
    metrics = model_metrics(games, [], {1: 0.0}, {"nodes_1": 1})
    assert (metrics["play/legal_move_rate"], metrics["play/illegal_loss_share"], metrics["play/nodes_1/losses"]) == (0.0, 1.0, 4)
    assert metrics["play/elo"] == -1000.0 and metrics["play/elo_hi"] < 0.0
    assert summary(spec, metrics)[-1].endswith("on the levels' scale (the fit's edge: below every level)")
