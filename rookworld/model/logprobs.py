"""Per-token log-probs (and entropies) of given sequences from one fresh forward pass.

The output projection and log_softmax run in chunks over time, so float32 logits for the whole
[B, T, V] never exist at once. With gradients on, each chunk is checkpointed: backward recomputes
its logits instead of keeping every chunk's [B, chunk, V] log-softmax alive.

On CUDA with Triton (`fused=None` picks it), the projection, log-softmax, gather and entropy run
fused instead (rookworld.model.fused_logprobs): same values to float32 rounding, a fraction of the
memory traffic, and no float32 logits at all. Under autocast the projection runs in its dtype.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from rookworld.model.fused_logprobs import fused_available, fused_token_logprobs
from rookworld.model.gpt2 import GPT


def token_logprobs(model: GPT, input_ids: Tensor, attention_mask: Tensor | None, position_ids: Tensor | None,
                   start: int, temperature: float = 1.0, chunk_size: int = 32,
                   with_entropy: bool = False, fused: bool | None = None) -> Tensor | tuple[Tensor, Tensor]:
    """log p(input_ids[:, t] | input_ids[:, :t]) for t >= start, float32 [B, T - start].

    Logits are divided by `temperature`. With `with_entropy`, also returns the entropy [B, T - start]
    of each predicted distribution. Values at padding positions are finite garbage: mask them.
    """
    if not 1 <= start < input_ids.shape[1]:
        raise ValueError(f"start must be in [1, {input_ids.shape[1]}), got {start}")
    hidden = model.hidden(input_ids, position_ids, attention_mask)[:, start - 1:-1]
    return hidden_logprobs(model, hidden, input_ids[:, start:], temperature, chunk_size, with_entropy, fused)


def completion_logprobs(model: GPT, prompt_ids: Tensor, prompt_mask: Tensor, prompt_positions: Tensor,
                        group: Tensor, completion_ids: Tensor, completion_mask: Tensor,
                        completion_positions: Tensor, temperature: float = 1.0, chunk_size: int = 32,
                        with_entropy: bool = False, fused: bool | None = None,
                        broadcast_width: int = 0) -> Tensor | tuple[Tensor, Tensor]:
    """`token_logprobs` of completions [B, N] whose rows share prompts [U, P] (completion b continues
    prompt group[b]): each prompt runs once (GPT.completion_hidden). Same values to float rounding."""
    hidden = model.completion_hidden(prompt_ids, prompt_mask, prompt_positions, group, completion_ids,
                                     completion_mask, completion_positions, broadcast_width)
    return hidden_logprobs(model, hidden, completion_ids, temperature, chunk_size, with_entropy, fused)


def hidden_logprobs(model: GPT, hidden: Tensor, targets: Tensor, temperature: float, chunk_size: int,
                    with_entropy: bool, fused: bool | None) -> Tensor | tuple[Tensor, Tensor]:
    """Log-probs (and entropies) [B, T] of `targets` [B, T] under the logits of `hidden` [B, T, C]."""
    if fused_available(hidden.device) if fused is None else fused:
        logp, entropy = fused_logprobs(model, hidden, targets, temperature)
        return (logp, entropy) if with_entropy else logp
    use_checkpoint = torch.is_grad_enabled() and hidden.requires_grad
    logps, entropies = [], []
    for begin in range(0, targets.shape[1], chunk_size):
        args = (hidden[:, begin:begin + chunk_size], targets[:, begin:begin + chunk_size],
                model.wte.weight, temperature, with_entropy)
        logp, entropy = checkpoint(chunk_logprobs, *args, use_reentrant=False) if use_checkpoint \
            else chunk_logprobs(*args)
        logps.append(logp)
        entropies.append(entropy)
    logp = torch.cat(logps, dim=1)
    return (logp, torch.cat(entropies, dim=1)) if with_entropy else logp


def fused_logprobs(model: GPT, hidden: Tensor, targets: Tensor, temperature: float) -> tuple[Tensor, Tensor]:
    device = hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
    B, T, C = hidden.shape
    with torch.autocast(device, enabled=False):
        logp, entropy = fused_token_logprobs(hidden.reshape(B * T, C).to(dtype), model.wte.weight.to(dtype),
                                             targets.reshape(B * T), temperature)
    return logp.view(B, T), entropy.view(B, T)


def chunk_logprobs(hidden: Tensor, targets: Tensor, weight: Tensor, temperature: float,
                   with_entropy: bool) -> tuple[Tensor, Tensor | None]:
    logprobs = (torch.nn.functional.linear(hidden, weight).float() / temperature).log_softmax(-1)
    token_logp = logprobs.gather(-1, targets[..., None])[..., 0]
    entropy = -(logprobs.exp() * logprobs).sum(-1) if with_entropy else None
    return token_logp, entropy
