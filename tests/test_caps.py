"""Every preset and sweep caps each task at or above the longest correct completion of its data
(rookworld.commands.caps: the stop token included), so no correct answer is cut."""
from __future__ import annotations

from pathlib import Path

import pytest

from rookworld.app.config import compose
from rookworld.commands.caps import arbiter_draws, completion_tokens, cuts, longest_completions
from rookworld.data.positions import ProblemSampler, load_arbiter_problems, load_policy_problems
from rookworld.model.hub import ModelLoadError
from rookworld.model.tokenizer import ChessTokenizer

ROOT = Path(__file__).resolve().parents[1]
PRESETS = sorted(path.stem for path in (ROOT / "conf" / "experiment").glob("*.yaml"))
SWEEPS = sorted(path.stem for path in (ROOT / "sweeps").glob("*.yaml"))
RUNS = ([("config", [])] + [("sft" if name.startswith("sft_") else "config", [f"experiment={name}"]) for name in PRESETS]
        + [("config", [f"sweeps={name}"]) for name in SWEEPS] + [("sft", []), ("bench", [])])


def run_param(config_name: str, overrides: list[str]):
    """A RUNS entry as a test case; a GRPO preset or sweep on the self-play data runs in the worker of
    tests/test_selfplay_data.py, whose loads of the same pools it reuses (cached per process)."""
    group, _, name = overrides[0].partition("=") if overrides else ("", "", "")
    folder = {"experiment": ROOT / "conf" / "experiment", "sweeps": ROOT / "sweeps"}.get(group)
    preset = folder / f"{name}.yaml" if folder else None
    selfplay = config_name == "config" and preset is not None and preset.is_file() \
        and "override /data: selfplay" in preset.read_text()
    return pytest.param(config_name, overrides, marks=[pytest.mark.xdist_group("selfplay_data")] if selfplay else [],
                        id=f"{config_name}-{' '.join(overrides) or '-'}")


@pytest.mark.slow  # ~30 s of CPU: the A: stream of the 400-step presets
@pytest.mark.parametrize("config_name, overrides", [run_param(*run) for run in RUNS])
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


@pytest.mark.parametrize("overrides", [["experiment=grpo_move_value"], ["task_mix=balanced", "steps=7", "prompts_per_step=5"],
                                       ["steps=3", "grpo.dynamic_sampling.enabled=true"]])
def test_the_a_stream_bound_holds_what_the_sampler_draws(overrides: list[str]) -> None:
    """The caps read as many A: problems as the task mix's sampler can draw in the run, dynamic-sampling
    rounds included (every round a full batch), and not many more."""
    cfg = compose(overrides)
    sampler = ProblemSampler(load_policy_problems("validation"), load_arbiter_problems("validation"),
                             weights=dict(cfg.task_mix), seed=0)
    rounds = cfg.grpo.dynamic_sampling.max_rounds if cfg.grpo.dynamic_sampling.enabled else 1
    drawn = sum(p.task == "A" for _ in range(cfg.steps * rounds) for p in sampler.sample(cfg.prompts_per_step))
    assert drawn <= arbiter_draws(cfg) <= drawn + rounds + 1
