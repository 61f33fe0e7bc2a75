"""The model layer: pure-PyTorch GPT-2, tokenizer, hub I/O, sampling and log-probs.

`load_model(...)` (rookworld.model.hub) is the one entry point for configuration code.
"""

from rookworld.model.gpt2 import GPT, GPTConfig, KVCache
from rookworld.model.hub import ModelLoadError, create_tiny, load_model, load_pretrained, save_pretrained
from rookworld.model.logprobs import token_logprobs
from rookworld.model.sampling import Generation, generate
from rookworld.model.tokenizer import ChessTokenizer

__all__ = [
    "GPT", "GPTConfig", "KVCache", "ModelLoadError", "create_tiny", "load_model", "load_pretrained",
    "save_pretrained", "token_logprobs", "Generation", "generate", "ChessTokenizer",
]
