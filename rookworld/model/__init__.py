"""The model layer: pure-PyTorch GPT-2 (gpt2.py), tokenizer, hub I/O (hub.py), sampling and log-probs.

`load_model(...)` (rookworld.model.hub) is the one entry point for configuration code. The package imports
nothing itself, so that code which needs only a light module (the tokenizer, ModelLoadError) loads no torch.
"""
