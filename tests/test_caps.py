"""Every preset and sweep caps each task at or above the longest correct completion of its data
(rookworld.data.caps: the stop token included), so no correct answer is cut."""
from __future__ import annotations

from pathlib import Path

import pytest

from rookworld.config import compose
from rookworld.data.caps import completion_tokens, cuts, longest_completions
from rookworld.data.positions import load_policy_problems
from rookworld.model.hub import ModelLoadError
from rookworld.model.tokenizer import ChessTokenizer

ROOT = Path(__file__).resolve().parents[1]
PRESETS = sorted(path.stem for path in (ROOT / "conf" / "experiment").glob("*.yaml"))
SWEEPS = sorted(path.stem for path in (ROOT / "sweeps").glob("*.yaml"))
RUNS = ([("config", [])] + [("sft" if name.startswith("sft_") else "config", [f"experiment={name}"]) for name in PRESETS]
        + [("config", [f"sweeps={name}"]) for name in SWEEPS] + [("sft", []), ("bench", [])])


@pytest.mark.slow  # ~30 s of CPU: the A: stream of the 400-step presets
@pytest.mark.parametrize("config_name, overrides", RUNS, ids=lambda v: v if isinstance(v, str) else " ".join(v) or "-")
def test_caps_fit_every_correct_completion(config_name: str, overrides: list[str]) -> None:
    cfg = compose(overrides, config_name)
    try:
        too_short = cuts(cfg)
    except ModelLoadError as error:  # a hub model's tokenizer, not downloaded on this machine
        pytest.skip(f"tokenizer unavailable: {error}")
    except FileNotFoundError as error:  # a preset's generated data (experiment=sft_selfplay), not made here
        pytest.skip(f"data not made on this machine: {error}")
    assert not too_short, f"caps (cap, longest correct completion) that cut correct answers: {too_short}"


def test_a_cap_one_below_the_longest_completion_cuts() -> None:
    cfg = compose(["experiment=quickstart"])
    longest = longest_completions(cfg)
    cfg.sampling.max_new_tokens.P = longest["P"] - 1
    assert cuts(cfg) == {"P": (longest["P"] - 1, longest["P"])}


def test_the_longest_policy_completion_is_a_short_fen_padded_to_the_fen_width() -> None:
    tokenizer = ChessTokenizer.tiny()
    problems = load_policy_problems("train")
    tokens = completion_tokens(tokenizer, problems)
    longest = problems[tokens.index(max(tokens))]
    shortest_fen = min(len(p.truth.fen) for p in problems)
    assert len(longest.truth.fen) < shortest_fen + 10  # padding spaces are one token each
