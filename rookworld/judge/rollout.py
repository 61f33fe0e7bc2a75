"""From problems to completions: prompt token ids, batched generation, decoding.

A prompt is `[end-of-text] + encode(prompt_text)`, an exact token prefix of a training document
(tasks.md). Completions are the exact sampled token ids; text is decoded from them only for scoring.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from rookworld.model.sampling import Generation
from rookworld.tasks import Problem


@dataclass
class Rollout:
    problems: list[Problem]    # one per row
    generation: Generation

    @property
    def completion_lengths(self) -> torch.Tensor:
        return self.generation.completion_mask.sum(1)


def prompt_ids(tokenizer, problem: Problem) -> list[int]:
    return [tokenizer.eos_id] + tokenizer.encode(problem.prompt_text)


def generate_for_problems(decoder, tokenizer, problems: list[Problem], max_new_tokens: dict[str, int], *,
                          greedy: bool = False, temperature: float = 1.0, top_k: int = 0,
                          top_p: float = 1.0, generator: torch.Generator | None = None,
                          on_finished=None) -> Rollout:
    """`decoder`: fast_sampling.make_decoder's (StaticDecoder on CUDA, else sampling.PlainDecoder);
    `on_finished`: the decoder's hook for rows whose completions are final before the end."""
    encoded: dict[str, list[int]] = {}  # the G rows of a group share one prompt: encode it once
    for problem in problems:
        if problem.prompt_text not in encoded:
            encoded[problem.prompt_text] = prompt_ids(tokenizer, problem)
    generation = generate_for_prompts(
        decoder, tokenizer, [encoded[p.prompt_text] for p in problems], [int(max_new_tokens[p.task]) for p in problems],
        greedy=greedy, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator,
        on_finished=on_finished)
    return Rollout(problems=list(problems), generation=generation)


def generate_for_prompts(decoder, tokenizer, prompts: list[list[int]], max_new_tokens: list[int], *,
                         greedy: bool = False, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                         generator: torch.Generator | None = None, on_finished=None) -> Generation:
    """Completions of prompt token ids (`[end-of-text] + encode(text)`), each up to its token cap."""
    return decoder.generate(
        prompts,
        max_new_tokens,
        temperature=temperature,
        top_k=top_k or None,
        top_p=top_p if top_p < 1.0 else None,
        greedy=greedy or temperature == 0,
        stop_ids=tokenizer.stop_ids,
        pad_id=tokenizer.pad_id,
        generator=generator,
        on_finished=on_finished,
    )


def stopped(tokenizer, gen: Generation) -> torch.Tensor:
    """[B] bool: the row ended with a stop token (not cut at its token cap)."""
    lengths = gen.completion_mask.sum(1)
    last = gen.completion_ids.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    is_stop = torch.isin(last, torch.tensor(tokenizer.stop_ids, device=last.device))
    return is_stop & (lengths > 0)


def completion_text(tokenizer, ids: list[int]) -> str:
    """Text of one completion (its token ids, the stop token included when it stopped), without the
    stop token."""
    return tokenizer.decode(ids[:-1] if ids and ids[-1] in tokenizer.stop_ids else ids)


def decode_completions(tokenizer, rollout: Rollout, rows: list[int] | None = None) -> list[str]:
    """Completion text of each row (or of `rows`) without its stop token."""
    return decode_generation(tokenizer, rollout.generation, rows)


def decode_generation(tokenizer, gen: Generation, rows: list[int] | None = None) -> list[str]:
    """Completion text of each row of `gen` (or of `rows`) without its stop token."""
    ids, mask = gen.completion_ids, gen.completion_mask
    if rows is not None:
        index = torch.tensor(rows, dtype=torch.long, device=ids.device)
        ids, mask = ids.index_select(0, index), mask.index_select(0, index)
    return [completion_text(tokenizer, [t for t, keep in zip(row_ids, row_mask) if keep])
            for row_ids, row_mask in zip(ids.tolist(), mask.tolist())]  # one host transfer each
