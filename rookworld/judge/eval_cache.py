"""The step-0 evaluation of a starting model, computed once and reused (`eval.cache_dir`).

Every trial of a sweep starts from the same weights and evaluates them greedily on the same held-out
problems: the same decode, the same scores. The first run stores the result as
`<eval.cache_dir>/<key>.json` (written to a temporary file, then renamed: readers never see half a
file); a later run whose key matches loads it and logs it exactly as if it had evaluated (metrics
and samples at step 0). The key is a SHA-256 of everything that determines the result:

  - the policy's weights: every tensor of its state dict (name, dtype, shape, bytes);
  - the model config (source, path, revision, shape: the tokenizer comes with it);
  - the held-out problems, prompt and ground truth (their repr);
  - the evaluation settings (token caps, batch size, samples logged) and the reward config (the
    logged samples carry rewards);
  - where it runs: device type, model.dtype, fast or plain decoder, the torch version;
  - the source of the rookworld package (decoding, parsing and scoring code).

Greedy decoding draws nothing from the trainer's random generator, so a run that reuses the result
continues exactly as one that computed it.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch

from rookworld.judge.evaluate import EvalResult
from rookworld.tracking import absolute_path, hydra_base_dir

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def weights_digest(model: torch.nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        data = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}|{data.dtype}|{tuple(data.shape)}|".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


def source_digest(package_dir: Path = PACKAGE_DIR) -> str:
    digest = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        digest.update(str(path.relative_to(package_dir)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def cache_key(model: torch.nn.Module, problems: list, settings: dict) -> str:
    """`settings`: everything else the result depends on (JSON-serialisable; see the module docstring)."""
    digest = hashlib.sha256()
    for part in (weights_digest(model), source_digest(), json.dumps(settings, sort_keys=True, default=str)):
        digest.update(part.encode() + b"\0")
    for problem in problems:
        digest.update(repr(problem).encode() + b"\0")
    return digest.hexdigest()


class EvalCache:
    """One cached evaluation: `load()` (None when absent) and `store(result)`. A relative `directory`
    is relative to the launch directory (Hydra's runtime.cwd, else the cwd)."""

    def __init__(self, directory: str, key: str):
        self.path = absolute_path(directory, hydra_base_dir()) / f"{key}.json"

    def load(self) -> EvalResult | None:
        if not self.path.exists():
            return None
        return EvalResult(**json.loads(self.path.read_text()))

    def store(self, result: EvalResult) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = tempfile.NamedTemporaryFile("w", dir=self.path.parent, prefix=f".{self.path.stem}.", suffix=".tmp",
                                             delete=False)
        try:
            with handle:
                json.dump(asdict(result), handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(handle.name, self.path)
        finally:
            Path(handle.name).unlink(missing_ok=True)  # gone after the rename; a leftover only after an error
