"""Optimizer construction and its learning rate (the schedule itself: specs/optimizer.Schedule.lr_at)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # the spec is read by its fields: the optimizer needs no spec module to run
    from rookworld.specs.optimizer import Optimizer


def build_optimizer(params, spec: Optimizer) -> torch.optim.Optimizer:
    """The torch optimizer of a conf/optimizer/ spec, by its name."""
    if spec.name == "adamw":
        return torch.optim.AdamW(params, lr=spec.lr, betas=tuple(spec.betas), eps=spec.eps,
                                 weight_decay=spec.weight_decay, fused=spec.fused)
    if spec.name == "sgd":
        return torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum, nesterov=spec.nesterov,
                               weight_decay=spec.weight_decay)
    raise ValueError(f"optimizer.name={spec.name!r}: expected adamw or sgd")


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
