"""Optimizer construction and its learning rate (the schedule itself: specs/optimizer.Schedule.lr_at)."""
from __future__ import annotations

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
