"""Compose real configs for short CPU runs of the training loop on the shipped rookworld_tiny model.

P: completions are cut at 24 tokens (fast, always malformed); A: completions fit in 60 tokens, so
A: rewards vary and GRPO has a signal (task_mix=env_only for the tests that need one).
Also the prompts the sampling tests decode from.
"""
from pathlib import Path

import rookworld.app.config  # noqa: F401  (registers the ${rookworld.asset:} resolver)
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

CONF_DIR = str(Path(__file__).resolve().parents[1] / "conf")
TINY_RUN = ["model=rookworld_tiny", "device=cpu", "optimizer.lr=2e-5", "optimizer.warmup_steps=2",
            "eval.num_samples_logged=4", "steps=2", "eval.every=0", "eval.num_policy=4",
            "eval.num_arbiter=4", "prompts_per_step=2", "grpo.group_size=3",
            "sampling.max_new_tokens.P=24", "sampling.max_new_tokens.A=60"]


def tiny_config(tmp_path: Path, *overrides: str) -> DictConfig:
    """TINY_RUN + overrides; untracked (tracking=none) unless the overrides pick a tracking option."""
    tracking = [] if any(o.startswith("tracking=") for o in overrides) else ["tracking=none"]
    with initialize_config_dir(config_dir=CONF_DIR):
        return compose("config", overrides=[*TINY_RUN, *tracking, f"checkpoint.dir={tmp_path}/checkpoints",
                                            f"eval.cache_dir={tmp_path}/eval_cache", *overrides])


PROMPT_TEXTS = [
    "P: rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
    "A: 8/8/8/4k3/8/8/4K3/8 w - - 0 1+e2e3+e2e3+",
    "P: 8/8/8/8/8/8/8/K1k5 w - - 0 1",
]


def prompt_ids(tokenizer, repeat: int = 1) -> list[list[int]]:
    """PROMPT_TEXTS as model prompts (end-of-text first), the whole list `repeat` times."""
    return [[tokenizer.eos_id] + tokenizer.encode(text) for text in PROMPT_TEXTS] * repeat
