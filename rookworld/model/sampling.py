"""Batched sampling with a KV cache: left-padded prompts, per-row positions, per-row stops and caps.

One prefill over the left-padded prompts, then one token per step for every row. A row finishes at
the first of its stop tokens (the stop token is part of its completion) or at its own
`max_new_tokens`; from then on it emits `pad_id`, masked out of the completion and of attention.
The loop ends as soon as every row is finished, so N (the completion width) is the number of steps
actually run, at most max(max_new_tokens).

Log-probs are those of the distribution each token was drawn from: after temperature, top-k and
top-p; for greedy decoding (`greedy=True` or temperature 0) the log-softmax of the raw logits. With
top-k/top-p off they equal `token_logprobs(..., temperature=temperature)` on the returned tensors.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from rookworld.model.gpt2 import GPT, KVCache


@dataclass
class Generation:
    input_ids: Tensor  # [B, P+N] left-padded prompt, then completion
    attention_mask: Tensor  # [B, P+N] bool, True = real token
    position_ids: Tensor  # [B, P+N] cumsum(attention_mask) - 1, clamped at 0
    prompt_length: int  # P, the padded prompt width
    completion_ids: Tensor  # [B, N]
    completion_mask: Tensor  # [B, N] bool: generated tokens up to and including the stop token
    logprobs: Tensor  # [B, N] float32 under the sampling distribution, 0 where masked

    @classmethod
    def assemble(cls, prompt_ids: Tensor, prompt_mask: Tensor, completion_ids: Tensor,
                 completion_mask: Tensor, logprobs: Tensor) -> Generation:
        """Prompt and completion side by side, with positions counting real tokens only."""
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        return cls(
            input_ids=torch.cat([prompt_ids, completion_ids], dim=1),
            attention_mask=attention_mask,
            position_ids=(attention_mask.long().cumsum(-1) - 1).clamp(min=0),
            prompt_length=prompt_ids.shape[1],
            completion_ids=completion_ids,
            completion_mask=completion_mask,
            logprobs=logprobs,
        )

    @classmethod
    def stack(cls, parts: Sequence[tuple[Generation, Sequence[int]]]) -> Generation:
        """Rows `rows` of each generation, in order, as one batch: prompts left-padded and completions
        right-padded to the widest (padding masked out; positions unchanged)."""
        width = max(gen.prompt_length for gen, _ in parts)
        length = max(gen.completion_ids.shape[1] for gen, _ in parts)
        pieces = {"prompt_ids": [], "prompt_mask": [], "completion_ids": [], "completion_mask": [], "logprobs": []}
        for gen, rows in parts:
            index = torch.tensor(list(rows), dtype=torch.long, device=gen.input_ids.device)
            left, right = width - gen.prompt_length, length - gen.completion_ids.shape[1]
            P = gen.prompt_length
            pieces["prompt_ids"].append(F.pad(gen.input_ids[index, :P], (left, 0)))
            pieces["prompt_mask"].append(F.pad(gen.attention_mask[index, :P], (left, 0)))
            pieces["completion_ids"].append(F.pad(gen.completion_ids[index], (0, right)))
            pieces["completion_mask"].append(F.pad(gen.completion_mask[index], (0, right)))
            pieces["logprobs"].append(F.pad(gen.logprobs[index], (0, right)))
        return cls.assemble(**{name: torch.cat(tensors) for name, tensors in pieces.items()})

    def completions(self) -> list[list[int]]:
        """Each row's generated token ids (stop token included), without padding."""
        return [ids[mask].tolist() for ids, mask in zip(self.completion_ids, self.completion_mask)]


@torch.no_grad()
def generate(model: GPT, prompts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], *,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             stop_ids: Iterable[int] = (), pad_id: int, generator: torch.Generator | None = None,
             greedy: bool = False) -> Generation:
    """Sample completions for `prompts` (token id lists); `generator` must live on the model's device."""
    check_request(model, prompts, max_new_tokens)
    greedy = greedy or temperature == 0
    device = model.wte.weight.device

    prompt_ids, prompt_mask = left_pad(prompts, pad_id, device)
    caps = torch.tensor(list(max_new_tokens), device=device)
    stops = torch.tensor(sorted(set(stop_ids)), dtype=torch.long, device=device)
    cache = KVCache.for_model(model, len(prompts), prompt_ids.shape[1] + int(caps.max()))

    positions = (prompt_mask.long().cumsum(-1) - 1).clamp(min=0)
    logits = model.unembed(model.hidden(prompt_ids, positions, prompt_mask, cache)[:, -1]).float()
    next_position = prompt_mask.sum(-1)
    attention_mask = prompt_mask
    finished = caps <= 0
    tokens, logprobs, active_masks = [], [], []
    for step in range(int(caps.max())):
        token, logprob = sample_next(logits, temperature, top_k, top_p, greedy, generator)
        active = ~finished
        tokens.append(torch.where(active, token, pad_id))
        logprobs.append(torch.where(active, logprob, 0.0))
        active_masks.append(active)
        finished = finished | torch.isin(token, stops) | (step + 1 >= caps)
        if bool(finished.all()):
            break
        attention_mask = torch.cat([attention_mask, active[:, None]], dim=1)
        hidden = model.hidden(tokens[-1][:, None], next_position[:, None], attention_mask, cache)
        logits = model.unembed(hidden[:, -1]).float()
        next_position = next_position + active.long()

    return build_generation(prompt_ids, prompt_mask, tokens, active_masks, logprobs)


def check_request(model: GPT, prompts: Sequence[Sequence[int]], max_new_tokens: Sequence[int]) -> None:
    """One cap per prompt, no empty prompt, and every row fits the model's context."""
    if len(prompts) != len(max_new_tokens):
        raise ValueError(f"{len(prompts)} prompts but {len(max_new_tokens)} max_new_tokens")
    if not prompts or min(len(p) for p in prompts) == 0:
        raise ValueError("every prompt needs at least one token")
    longest = max(len(p) + n for p, n in zip(prompts, max_new_tokens))
    if longest > model.config.n_positions:
        raise ValueError(f"prompt + max_new_tokens reaches {longest} tokens, model context is {model.config.n_positions}")


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int, device: torch.device,
             width: int | None = None) -> tuple[Tensor, Tensor]:
    """Token ids and real-token mask [B, width], prompts right-aligned (width: the longest by default)."""
    width = max(len(p) for p in prompts) if width is None else width
    ids = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in prompts], dtype=torch.long)
    mask = torch.tensor([[False] * (width - len(p)) + [True] * len(p) for p in prompts], dtype=torch.bool)
    return ids.to(device), mask.to(device)


def sample_next(logits: Tensor, temperature: float, top_k: int | None, top_p: float | None,
                greedy: bool, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """One token per row from float32 logits [B, V], and its log-prob under the distribution used."""
    if greedy:
        token = logits.argmax(-1)
        return token, logits.log_softmax(-1).gather(-1, token[:, None])[:, 0]
    logits = logits / temperature
    if top_k is not None and top_k > 0:
        logits = keep_top_k(logits, top_k)
    if top_p is not None and top_p < 1.0:
        logits = keep_top_p(logits, top_p)
    logprobs = logits.log_softmax(-1)
    # torch.multinomial's one-sample algorithm written out: it raises on non-finite probabilities
    # (after a host sync); this returns a token and a non-finite log-prob, which the trainer counts.
    noise = torch.empty_like(logprobs).exponential_(1, generator=generator)
    token = (logprobs.exp() / noise).argmax(-1)
    return token, logprobs.gather(-1, token[:, None])[:, 0]


def keep_top_k(logits: Tensor, k: int) -> Tensor:
    kth_largest = logits.topk(min(k, logits.shape[-1]), dim=-1).values[:, -1:]
    return logits.masked_fill(logits < kth_largest, float("-inf"))


def keep_top_p(logits: Tensor, p: float) -> Tensor:
    """Nucleus: the smallest set of most likely tokens whose probability reaches p."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(-1)
    mass_before = probs.cumsum(-1) - probs
    drop_sorted = mass_before >= p  # the most likely token always has mass_before 0 and stays
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def build_generation(prompt_ids: Tensor, prompt_mask: Tensor, tokens: list[Tensor],
                     active_masks: list[Tensor], logprobs: list[Tensor]) -> Generation:
    B = prompt_ids.shape[0]
    completion_ids = torch.stack(tokens, 1) if tokens else prompt_ids.new_zeros((B, 0))
    completion_mask = torch.stack(active_masks, 1) if tokens else prompt_mask.new_zeros((B, 0))
    completion_logprobs = (torch.stack(logprobs, 1) if tokens
                           else torch.zeros((B, 0), device=prompt_ids.device))
    return Generation.assemble(prompt_ids, prompt_mask, completion_ids, completion_mask, completion_logprobs)


class PlainDecoder:
    """`sampling.generate` behind the decoder interface (the CPU path, and the benchmark baseline)."""

    def __init__(self, model: GPT, *, ignore_stops: bool = False):
        self.model, self.ignore_stops = model, ignore_stops

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], *,
                 stop_ids: Iterable[int] = (), on_finished=None, **kwargs) -> Generation:
        """`on_finished` is accepted for the decoder interface and never called: no row is reported
        before the result (the caller reads every row from it)."""
        return generate(self.model, prompts, max_new_tokens, stop_ids=() if self.ignore_stops else stop_ids,
                        **kwargs)

    def close(self) -> None:
        pass
