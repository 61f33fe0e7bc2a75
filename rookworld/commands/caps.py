"""Token caps derived from the data: the longest correct completion of each task, with its stop token.

    python -m rookworld.commands.caps experiment=grpo_rookworld_tiny      # any training overrides
    python -m rookworld.commands.caps sweeps=recipe_search
    python -m rookworld.commands.caps --config sft experiment=sft_rookworld_tiny

composes the config as `python -m rookworld.train` would and prints, per task, the most tokens (in
the config's model's tokenizer) that a correct completion needs, the stop token included, over every
problem the run can meet: all P: training positions, every held-out part, and the first problems of
the A: training stream, as many as a run can draw: steps x prompts_per_step x the A: share of the task
mix, rounded up, plus one (the sampler's per-batch rounding), times grpo.dynamic_sampling.max_rounds
when dynamic sampling is on. A cap below it cuts a correct answer. The tests check every preset and
sweep against it.
"""

from __future__ import annotations

import math
import sys
from functools import lru_cache
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from rookworld.app.composition import compose_command
from rookworld.app.config import spec_of
from rookworld.app.errors import as_command

from rookworld.data.positions import HELD_OUT_SPLITS, load_arbiter_problems, load_policy_problems
from rookworld.model.tokenizer import ChessTokenizer
from rookworld.specs.model import Model
from rookworld.tasks import Problem, perfect_completion

TASKS = ("P", "A")


def completion_tokens(tokenizer: ChessTokenizer, problems: list[Problem]) -> list[int]:
    """Tokens each problem's correct completion takes: the completion's tokens and the stop token after it."""
    return [len(ids) + 1 for ids in tokenizer.encode_batch([perfect_completion(p) for p in problems])]


def model_tokenizer(model: Model) -> ChessTokenizer:
    """The tokenizer of a model spec: its folder's, or the tiny one of a random model."""
    from rookworld.model.hub import read_tokenizer, resolve_directory

    source = model.load_arguments()
    if source.get("path") is not None:
        return read_tokenizer(Path(source["path"]))
    if source.get("tiny") is not None:
        return ChessTokenizer.tiny()
    return read_tokenizer(resolve_directory(source["source"], source.get("revision")))


def arbiter_draws(cfg: DictConfig) -> int:
    """The most A: training problems a run of `cfg` draws (0 for `python -m rookworld.sft`: no A: stream)."""
    steps = int(OmegaConf.select(cfg, "steps", default=0))
    prompts = int(OmegaConf.select(cfg, "prompts_per_step", default=0))
    share = float(OmegaConf.select(cfg, "task_mix.A", default=1.0))
    if steps * prompts * share == 0:
        return 0
    rounds = int(cfg.grpo.dynamic_sampling.max_rounds) if cfg.grpo.dynamic_sampling.enabled else 1
    return rounds * (math.ceil(steps * prompts * share) + 1)


def run_problems(data: DictConfig, drawn: int) -> dict[str, list[Problem]]:
    """Every problem of each task that a run on `data` can train or evaluate on, `drawn` of them from
    the A: training stream (arbiter_draws)."""
    policy = load_policy_problems("train", data) + [p for split in HELD_OUT_SPLITS
                                                   for p in load_policy_problems(split, data)]
    arbiter = [p for split in HELD_OUT_SPLITS for p in load_arbiter_problems(split, data)]
    return {"P": policy, "A": arbiter + stream_problems(data, 0, drawn)}


def stream_problems(data: DictConfig, start: int, stop: int) -> list[Problem]:
    """Problems start..stop-1 of the A: training stream on `data` (none read when the range is empty)."""
    if stop <= start:
        return []
    stream = load_arbiter_problems("train", data)
    return stream[start:stop] if isinstance(stream, list) else [stream[i] for i in range(start, stop)]


@lru_cache(maxsize=4)
def _tokenizer(model_yaml: str) -> ChessTokenizer:
    return model_tokenizer(spec_of(Model, OmegaConf.to_container(OmegaConf.create(model_yaml)), "model"))


def _longest(model_yaml: str, data_yaml: str, arbiter_draws: int) -> tuple[tuple[str, int], ...]:
    """Every preset of one model and data shares the fixed problems' longest and a prefix of the A: stream's."""
    _tokenizer(model_yaml)  # a model whose tokenizer cannot be read fails before any data loads
    stream = _stream_tokens(model_yaml, data_yaml, arbiter_draws)[:arbiter_draws]
    return tuple((task, max([longest, *(stream if task == "A" else [])]))
                 for task, longest in _fixed_longest(model_yaml, data_yaml))


@lru_cache(maxsize=16)
def _fixed_longest(model_yaml: str, data_yaml: str) -> tuple[tuple[str, int], ...]:
    """The longest completion of each task over its problems outside the A: training stream."""
    tokenizer = _tokenizer(model_yaml)
    problems_by_task = run_problems(OmegaConf.create(data_yaml), 0)
    return tuple((task, max(completion_tokens(tokenizer, problems))) for task, problems in problems_by_task.items())


_STREAM_TOKENS: dict[tuple[str, str], list[int]] = {}  # the first A: stream problems' completion tokens, grown on demand


def _stream_tokens(model_yaml: str, data_yaml: str, drawn: int) -> list[int]:
    tokens = _STREAM_TOKENS.setdefault((model_yaml, data_yaml), [])
    more = stream_problems(OmegaConf.create(data_yaml), len(tokens), drawn)
    tokens += completion_tokens(_tokenizer(model_yaml), more) if more else []
    return tokens


def longest_completions(cfg: DictConfig) -> dict[str, int]:
    """{task: the most tokens a correct completion of a problem of a `cfg` run takes, stop included}."""
    return dict(_longest(OmegaConf.to_yaml(cfg.model, resolve=True), OmegaConf.to_yaml(cfg.data, resolve=True),
                         arbiter_draws(cfg)))


def cuts(cfg: DictConfig) -> dict[str, tuple[int, int]]:
    """{task: (cap, longest)} for each task whose cap is below its longest correct completion."""
    longest = longest_completions(cfg)
    caps = cfg.sampling.max_new_tokens
    return {task: (int(caps[task]), longest[task]) for task in TASKS if int(caps[task]) < longest[task]}


def main(argv: list[str] | None = None) -> None:
    overrides = list(sys.argv[1:] if argv is None else argv)
    config_name = "config"
    if overrides[:1] == ["--config"]:
        config_name, overrides = overrides[1], overrides[2:]
    with as_command():  # a bad override or value: one line, exit 2
        cfg = compose_command(overrides, config_name)
        longest = longest_completions(cfg)
    for task in TASKS:
        cap = int(cfg.sampling.max_new_tokens[task])
        verdict = "fits" if cap >= longest[task] else f"CUTS correct answers (raise to >= {longest[task]})"
        print(f"{task}: longest correct completion {longest[task]} tokens with the stop token; cap {cap}: {verdict}")
    sys.exit(1 if any(int(cfg.sampling.max_new_tokens[t]) < longest[t] for t in TASKS) else 0)


if __name__ == "__main__":
    main()
