"""The compute precision of the model's passes: bf16 autocast on CUDA, float32 elsewhere."""
from __future__ import annotations

import contextlib

import torch


def autocast_for(device: torch.device, dtype: str):
    """bf16 autocast on CUDA unless model.dtype=float32 (the weights stay float32); nothing on the CPU."""
    if device.type == "cuda" and dtype in ("auto", "bfloat16"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
