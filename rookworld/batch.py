"""The update's batch: a step's rows (prompt + completion) in the layout the training passes read.

Rows come in GRPO groups that share a prompt: the distinct prompts are kept once ([U, P], left-padded)
and the model runs each once (GPT.completion_hidden); completions are [B, N], right-padded.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import torch

from rookworld.model.sampling import Generation, left_pad


@dataclass
class Batch:
    """Everything the update needs, fixed before the first gradient step."""
    prompt_ids: torch.Tensor            # [U, P] distinct prompts, left-padded
    prompt_mask: torch.Tensor           # [U, P]
    prompt_positions: torch.Tensor      # [U, P]
    groups: list[int]                   # [B] each row's prompt (on the host: micro-batches pick their prompts)
    group_ids: torch.Tensor             # [B] the same on the device
    completion_ids: torch.Tensor        # [B, N]
    completion_positions: torch.Tensor  # [B, N]
    mask: torch.Tensor                  # [B, N] float completion mask
    advantages: torch.Tensor | None = None  # [B] (set once the rewards are in)
    ref_logp: torch.Tensor | None = None  # [B, N] reference log-probs (KL on)
    old_logp: torch.Tensor | None = None  # [B, N] sampling-policy log-probs (batch reused)

    @classmethod
    def from_generation(cls, gen: Generation, rows: Sequence[int] | None = None) -> Batch:
        """The batch of `gen`'s rows (or of `rows` only, with the padding no picked row needs cut off)."""
        if rows is not None:
            gen = select_rows(gen, rows)
        P = gen.prompt_length
        prompts = [tuple(ids) + tuple(real) for ids, real in
                   zip(gen.input_ids[:, :P].tolist(), gen.attention_mask[:, :P].tolist())]
        first_row: dict[tuple, int] = {}
        for row, prompt in enumerate(prompts):
            first_row.setdefault(prompt, row)
        index = {prompt: i for i, prompt in enumerate(first_row)}
        device = gen.input_ids.device
        leaders = torch.tensor(list(first_row.values()), device=device)
        groups = [index[p] for p in prompts]
        return cls(prompt_ids=gen.input_ids[leaders, :P], prompt_mask=gen.attention_mask[leaders, :P],
                   prompt_positions=gen.position_ids[leaders, :P], groups=groups,
                   group_ids=torch.tensor(groups, device=device), completion_ids=gen.input_ids[:, P:],
                   completion_positions=gen.position_ids[:, P:], mask=gen.completion_mask.float())

    @classmethod
    def from_token_lists(cls, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
                         pad_id: int) -> Batch:
        """The batch (on the CPU) of rows given as token id lists, e.g. rows the decoder reported finished."""
        prompt_ids, prompt_mask = left_pad(prompts, pad_id, torch.device("cpu"))
        width = max(len(c) for c in completions)
        completion_ids = torch.tensor([list(c) + [pad_id] * (width - len(c)) for c in completions])
        completion_mask = torch.tensor([[True] * len(c) + [False] * (width - len(c)) for c in completions])
        no_logprobs = torch.zeros(completion_ids.shape)  # a Batch does not keep them
        return cls.from_generation(Generation.assemble(prompt_ids, prompt_mask, completion_ids, completion_mask,
                                                       no_logprobs))

    def to(self, device: torch.device) -> Batch:
        """The batch on `device`, copied without waiting for the work queued there (the copies from
        pageable memory are staged at once)."""
        return replace(self, **{f.name: value.to(device, non_blocking=True) for f in fields(self)
                                if isinstance(value := getattr(self, f.name), torch.Tensor)})

    def __len__(self) -> int:
        return len(self.groups)

    def group_size(self, index: torch.Tensor) -> int:
        """G when rows `index` are whole groups of G rows, one after the other (the usual GRPO batch;
        GPT.completion_hidden then runs faster), else 0."""
        groups = [self.groups[row] for row in index.tolist()]
        distinct = list(dict.fromkeys(groups))
        size = len(groups) // len(distinct)
        return size if groups == [g for g in distinct for _ in range(size)] else 0

    def rows(self, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """The model inputs and loss tensors of rows `index` (a CPU index) with their prompts only;
        ref_logp / old_logp when present."""
        picked = index.tolist()
        per_row = dict(completion_ids=self.completion_ids, completion_positions=self.completion_positions,
                       mask=self.mask, advantages=self.advantages, ref_logp=self.ref_logp, old_logp=self.old_logp)
        per_prompt = dict(prompt_ids=self.prompt_ids, prompt_mask=self.prompt_mask,
                          prompt_positions=self.prompt_positions)
        if picked == list(range(len(self))):  # the usual case: no copies (and no host-to-device transfer)
            return {"group": self.group_ids, **per_prompt, **{k: t for k, t in per_row.items() if t is not None}}
        prompts = sorted({self.groups[row] for row in picked})
        renumber = {prompt: i for i, prompt in enumerate(prompts)}
        device = self.mask.device
        group = torch.tensor([renumber[self.groups[row]] for row in picked], device=device)
        rows, prompt_rows = index.to(device), torch.tensor(prompts, device=device)
        return {"group": group, **{k: t[prompt_rows] for k, t in per_prompt.items()},
                **{k: t[rows] for k, t in per_row.items() if t is not None}}


def select_rows(gen: Generation, rows: Sequence[int]) -> Generation:
    """`gen`'s rows `rows`, without the prompt columns (left) and completion columns (right) that are
    padding in every one of them."""
    index = torch.tensor(list(rows), device=gen.input_ids.device)
    prompt_mask = gen.attention_mask[index, :gen.prompt_length]
    completion_mask = gen.completion_mask[index]
    prompt_width, completion_width = (int(n) for n in
                                      torch.stack([prompt_mask.sum(1).max(), completion_mask.sum(1).max()]).tolist())
    first = gen.prompt_length - prompt_width
    return Generation.assemble(gen.input_ids[index, first:gen.prompt_length], prompt_mask[:, first:],
                               gen.completion_ids[index, :completion_width], completion_mask[:, :completion_width],
                               gen.logprobs[index, :completion_width])
