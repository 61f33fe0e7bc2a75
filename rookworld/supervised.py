"""The supervised update of `python -m rookworld.sft` (and of its step benchmark): next-token
cross-entropy over a collated batch of documents, padding ignored, then one clipped optimizer step."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from rookworld.data.documents import IGNORE


def lm_loss(model, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the real tokens of a collated batch (padding ignored)."""
    logits = model(inputs)
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


def supervised_step(model, optimizer, inputs: torch.Tensor, targets: torch.Tensor, autocast,
                    max_grad_norm: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One update on a batch already on the model's device: (loss, gradient norm before clipping),
    both left on the device so the caller decides when to synchronise. max_grad_norm 0 = no clipping."""
    with autocast():
        loss = lm_loss(model, inputs, targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm or float("inf"))
    optimizer.step()
    return loss, grad_norm
