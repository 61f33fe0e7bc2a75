"""Optimizer construction and the learning-rate schedule (linear warm-up, cosine to a floor)."""
from __future__ import annotations

import math

import torch

from rookworld.specs.optimizer import SGD, AdamW, Optimizer


def build_optimizer(params, spec: Optimizer) -> torch.optim.Optimizer:
    """The torch optimizer of a conf/optimizer/ spec."""
    if isinstance(spec, AdamW):
        return torch.optim.AdamW(params, lr=spec.lr, betas=tuple(spec.betas), eps=spec.eps,
                                 weight_decay=spec.weight_decay, fused=spec.fused)
    if isinstance(spec, SGD):
        return torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum, nesterov=spec.nesterov,
                               weight_decay=spec.weight_decay)
    raise TypeError(f"not an optimizer spec: {spec!r}")


def lr_at(step: int, peak_lr: float, warmup_steps: int, total_steps: int, min_lr_ratio: float) -> float:
    """Learning rate for the update of step `step` (0-based)."""
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    decay_steps = max(total_steps - warmup_steps, 1)
    progress = min((step - warmup_steps) / decay_steps, 1.0)
    floor = peak_lr * min_lr_ratio
    return floor + 0.5 * (peak_lr - floor) * (1.0 + math.cos(math.pi * progress))


def load_state_keeping_settings(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Load a checkpoint's optimizer state (moments, step counts) but keep the hyperparameters of the
    optimizer's param groups, which come from the current config (load_state_dict would replace them
    with the checkpoint's)."""
    settings = [{key: value for key, value in group.items() if key != "params"} for group in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, setting in zip(optimizer.param_groups, settings, strict=True):
        group.update(setting)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
