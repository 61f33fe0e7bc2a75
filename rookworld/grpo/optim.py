"""An optimizer's state across a resume and its learning rate (the optimizer itself: specs/optimizer.py's
`build(params)`; the schedule: Schedule.lr_at)."""
from __future__ import annotations

import torch


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
