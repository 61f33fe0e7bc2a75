"""The benchmarked model: the configured one, or a random one of bench.random_model's shape; fresh
copies of it for each trainer."""
from __future__ import annotations

import sys

import torch

from rookworld.run.build import load_policy
from rookworld.model.gpt2 import GPT, GPTConfig
from rookworld.model.hub import ModelLoadError, load_model
from rookworld.model.tokenizer import ChessTokenizer
from rookworld.specs.bench import BenchSpec


def load_bench_model(spec: BenchSpec, device: torch.device) -> tuple[GPT, ChessTokenizer, str]:
    """The configured model, or a random one of bench.random_model's shape (see the module doc)."""
    mode = str(spec.bench.random_weights).lower()
    if mode != "true":
        try:
            policy, tokenizer = load_policy(spec.run.model, device)
            return policy, tokenizer, f"{spec.run.model.describe()} (loaded)"
        except ModelLoadError as error:
            if mode == "false":
                raise
            print(f"bench: {error}\nbench: using random weights instead", file=sys.stderr)
    policy, tokenizer = load_model(tiny={"seed": spec.run.seed, **spec.bench.random_model}, device=device)
    shape = policy.config
    description = (f"random GPT-2 {shape.n_layer}x{shape.n_embd}, vocab {shape.vocab_size} "
                   f"({sum(p.numel() for p in policy.parameters()) / 1e6:.1f}M params), tiny tokenizer")
    return policy.eval(), tokenizer, description


def fresh_policy(config: GPTConfig, state: dict, device: torch.device) -> GPT:
    """A new model holding `state` (kept on the CPU so that it adds nothing to GPU memory)."""
    model = GPT.on_meta(config)
    model.load_state_dict({k: v.to(device, copy=True) for k, v in state.items()}, assign=True)
    return model.eval()
