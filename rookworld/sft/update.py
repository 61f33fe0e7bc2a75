"""The supervised update of `python -m rookworld.sft` (and of its step benchmark): next-token
cross-entropy over a collated batch of documents, padding ignored, then one clipped optimizer step.

A batch is (inputs, targets) of right-padded rows (data/documents.collate), or packed rows
(inputs, targets, positions, segments) (data/packing.collate_rows); either way the loss is the mean
over the batch's target tokens, so the same documents give the same loss packed or not."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from rookworld.data.documents import IGNORE
from rookworld.specs.rules import require


def check_cuda_knobs(sft, device: torch.device) -> None:
    """sft.compile and flex attention (whose backward is CUDA's only) need a CUDA device."""
    require(not sft.compile or device.type == "cuda", "sft.compile", sft.compile, f"needs a CUDA device, not {device}")
    require(not sft.pack or sft.pack_attention != "flex" or device.type == "cuda", "sft.pack_attention",
            sft.pack_attention, f"flex trains on a CUDA device only, not {device} (sdpa: the same loss)")


def lm_loss(model, inputs: torch.Tensor, targets: torch.Tensor, positions: torch.Tensor | None = None,
            segments: torch.Tensor | None = None) -> torch.Tensor:
    """Mean next-token cross-entropy over the target tokens of a batch (padding ignored)."""
    logits = model(inputs) if segments is None else model(inputs, position_ids=positions, segments=segments)
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


def supervised_step(model, optimizer, batch: tuple[torch.Tensor, ...], autocast,
                    max_grad_norm: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One update on a batch already on the model's device: (loss, gradient norm before clipping),
    both left on the device so the caller decides when to synchronise. max_grad_norm 0 = no clipping."""
    with autocast():
        loss = lm_loss(model, *batch)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm or float("inf"))
    optimizer.step()
    return loss, grad_norm
