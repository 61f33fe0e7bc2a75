"""GPT-2 in plain PyTorch, numerically equal to Hugging Face's `GPT2LMHeadModel`.

Learned absolute positions, pre-LayerNorm blocks, tanh-approximated GELU, output projection tied to
the token embedding, attention through `scaled_dot_product_attention`. There is no dropout at all
(RookWorld-LM never trained with it, whatever its exported config says).

Left-padded batches: pass `attention_mask` [B, S] (True = real token; it covers the cached tokens
plus the new ones) and per-row `position_ids`. Packed rows (rookworld/data/packing.py): pass
`segments` [B, T], the document of each token, and `position_ids` that restart per document; each
token attends to the earlier tokens of its own document only (`packed_attention`: an explicit mask
through SDPA, or flex attention's block mask, which skips the blocks no token of a pair of documents sees). GRPO batches, whose rows come in groups that share a
prompt, go through `completion_hidden`: each distinct prompt runs once, and each completion attends
to its own prompt's keys and values (`SharedPrompts`). Parameter names follow GPT-2 (`wte`, `h.0.attn.c_attn`,
...) but linear weights use `nn.Linear`'s [out, in] layout; rookworld.model.hub converts to and from
the Conv1D [in, out] layout of the hub files.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.checkpoint import checkpoint

from rookworld.model.layer_norm import add_layer_norm, layer_norm_to

# SDPA backends, in order. Not cuDNN: it builds an execution plan for every new shape (tens of ms
# each time the padded prompt width changes) where flash / memory-efficient attention need none.
ATTENTION_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
ALIGN_BIAS = 16  # memory-efficient attention's alignment of an attention bias's rows (elements)


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int
    n_positions: int
    n_embd: int
    n_layer: int
    n_head: int
    layer_norm_epsilon: float = 1e-5

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} is not divisible by n_head {self.n_head}")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


class KVCache:
    """Preallocated keys and values of every layer: `data` [n_layer, 2, B, n_head, max_len, head_dim].

    All rows share one write position, `length` (left padding keeps the rows aligned). A forward pass
    with T new tokens writes their keys and values at [length, length + T) in every layer, then
    advances `length` by T. Fixed buffers and an explicit position are what a CUDA-graph decode step
    needs; this plain version slices up to `length` each step.
    """

    def __init__(self, n_layer: int, batch_size: int, n_head: int, head_dim: int, max_len: int, *,
                 device: torch.device | str | None = None, dtype: torch.dtype = torch.float32):
        self.data = torch.zeros(n_layer, 2, batch_size, n_head, max_len, head_dim, device=device, dtype=dtype)
        self.length = 0

    @classmethod
    def for_model(cls, model: GPT, batch_size: int, max_len: int) -> KVCache:
        config, weight = model.config, model.wte.weight
        return cls(config.n_layer, batch_size, config.n_head, config.head_dim, max_len,
                   device=weight.device, dtype=weight.dtype)

    @property
    def max_len(self) -> int:
        return self.data.shape[4]

    def write(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store the new keys/values [B, H, T, D] of `layer`; return all keys/values so far."""
        end = self.length + k.shape[2]
        if end > self.max_len:
            raise ValueError(f"KV cache overflow: {end} positions, capacity {self.max_len}")
        self.data[layer, 0, :, :, self.length:end] = k
        self.data[layer, 1, :, :, self.length:end] = v
        return self.data[layer, 0, :, :, :end], self.data[layer, 1, :, :, :end]

    def advance(self, n_tokens: int) -> None:
        self.length += n_tokens


@dataclass(frozen=True)
class SharedPrompts:
    """The token layout of `GPT.completion_hidden`: U prompts of width P, then B completions of width
    N, flattened into one sequence of U*P + B*N tokens; completion row b continues prompt group[b]."""
    group: Tensor            # [B] index of each completion's prompt
    prompt_bias: Tensor      # [U, 1, P, P] additive attention mask of the prompts (attention_bias)
    completion_bias: Tensor  # [B, 1, N, P + N] of the completions over their prompt and themselves
    broadcast_width: int     # G when group = [0]*G + [1]*G + ... (GRPO batches), else 0

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        """(U, P, B, N), read off the biases."""
        (U, _, P, _), (B, _, N, _) = self.prompt_bias.shape, self.completion_bias.shape
        return U, P, B, N

    @classmethod
    def build(cls, prompt_mask: Tensor, group: Tensor, completion_mask: Tensor, broadcast_width: int,
              dtype: torch.dtype) -> SharedPrompts:
        """The layout of boolean masks [U, P] and [B, N]; attention biases in `dtype` (the queries')."""
        (U, P), (B, N) = prompt_mask.shape, completion_mask.shape
        if broadcast_width and U * broadcast_width != B:
            raise ValueError(f"broadcast_width {broadcast_width} x {U} prompts != {B} completions")
        row_mask = torch.cat([prompt_mask[group], completion_mask], dim=1)  # [B, P + N] as a left-padded row
        return cls(group, attention_bias(attention_mask_4d(prompt_mask, 0, P, prompt_mask.device), dtype),
                   attention_bias(attention_mask_4d(row_mask, P, N, prompt_mask.device), dtype), broadcast_width)

    def rows_after_prompts(self, prompt_part: Tensor, completion_part: Tensor) -> Tensor:
        """[B, P + N, W]: each completion row's [N, W] after its prompt's [P, W] (one concatenation).
        Regular groups read each prompt broadcast over its G rows (backward: a sum per group,
        deterministic); others gather."""
        if self.broadcast_width:
            return PromptBroadcast.apply(prompt_part, completion_part, self.broadcast_width)
        return torch.cat([prompt_part[self.group], completion_part], dim=1)


class PromptBroadcast(torch.autograd.Function):
    """rows [B, P + N, W] = each of U prompts [P, W] copied to its G rows, then the rows' [N, W]: two
    copies into one buffer (a concatenation with a broadcast input runs ~4x slower); backward: a sum
    per group and a view."""

    @staticmethod
    def forward(ctx, prompt_part: Tensor, completion_part: Tensor, broadcast_width: int) -> Tensor:
        (U, P, W), N = prompt_part.shape, completion_part.shape[1]
        rows = prompt_part.new_empty(U, broadcast_width, P + N, W)
        rows[:, :, :P] = prompt_part[:, None]
        rows[:, :, P:] = completion_part.view(U, broadcast_width, N, W)
        ctx.shape = (U, broadcast_width, P, N, W)
        return rows.view(U * broadcast_width, P + N, W)

    @staticmethod
    def backward(ctx, grad_rows: Tensor):
        U, G, P, N, W = ctx.shape
        grad = grad_rows.view(U, G, P + N, W)
        return grad[:, :, :P].sum(1), grad[:, :, P:].reshape(U * G, N, W), None


@dataclass(frozen=True)
class FlexDocuments:
    """Document-causal attention of packed rows as flex attention's BlockMask."""
    block_mask: object  # torch.nn.attention.flex_attention.BlockMask (imported only when used)

    @classmethod
    def build(cls, segments: Tensor) -> FlexDocuments:
        return cls(document_block_mask(segments))


@torch.compiler.disable  # create_block_mask cannot be traced in a compiled forward: it runs eagerly, its mask goes in
def document_block_mask(segments: Tensor):
    from torch.nn.attention.flex_attention import create_block_mask

    def same_document(b, h, q, kv):
        return (segments[b, q] == segments[b, kv]) & (kv <= q)

    B, T = segments.shape
    return create_block_mask(same_document, B, None, T, T, device=segments.device)


_compiled_flex = {}  # device type -> flex_attention, compiled on CUDA (eager elsewhere: exact, unfused)


def flex_attention(q: Tensor, k: Tensor, v: Tensor, mask: FlexDocuments) -> Tensor:
    if q.device.type not in _compiled_flex:
        from torch.nn.attention.flex_attention import flex_attention as eager
        _compiled_flex[q.device.type] = torch.compile(eager, dynamic=False) if q.is_cuda else eager
    return _compiled_flex[q.device.type](q, k, v, block_mask=mask.block_mask)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)

    def forward(self, x: Tensor, mask: Tensor | SharedPrompts | FlexDocuments | None, kv_cache: KVCache | None,
                layer: int) -> Tensor:
        if isinstance(mask, SharedPrompts):
            return self.c_proj(self.shared_prompt_attention(self.c_attn(x[0]), mask)[None])
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in self.c_attn(x).split(C, dim=2))
        if kv_cache is not None:
            k, v = kv_cache.write(layer, k, v)
        if isinstance(mask, FlexDocuments):
            return self.c_proj(flex_attention(q, k, v, mask).transpose(1, 2).reshape(B, T, C))
        with sdpa_kernel(ATTENTION_BACKENDS):  # here, so that checkpoint recomputation picks the same kernel
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))

    def shared_prompt_attention(self, qkv: Tensor, layout: SharedPrompts) -> Tensor:
        """Attention outputs [U*P + B*N, C] from the projections `qkv` [U*P + B*N, 3C] (layout: SharedPrompts)."""
        (U, P, B, N), H = layout.sizes, self.n_head
        C = qkv.shape[1] // 3
        D = C // H
        # Views only (splits and unbinds): their backward is one concatenation or stack each, where
        # selecting q, k and v out of a [.., 3, H, D] view would zero-fill and copy per tensor.
        q, kv = qkv.split([C, 2 * C], dim=1)
        prompt_q, completion_q = q.split([U * P, B * N])
        prompt_kv, completion_kv = kv.split([U * P, B * N])
        row_kv = layout.rows_after_prompts(prompt_kv.view(U, P, 2 * C), completion_kv.view(B, N, 2 * C))

        def heads(t: Tensor, X: int) -> Tensor:  # [X*L, C] or [X, L, C] -> [X, H, L, D] view
            return t.reshape(X, -1, H, D).transpose(1, 2)

        prompt_k, prompt_v = prompt_kv.view(U, P, 2, C).unbind(2)
        row_k, row_v = row_kv.view(B, P + N, 2, C).unbind(2)
        with sdpa_kernel(ATTENTION_BACKENDS):
            y_prompt = F.scaled_dot_product_attention(heads(prompt_q, U), heads(prompt_k, U), heads(prompt_v, U),
                                                      attn_mask=layout.prompt_bias)
            y_completion = F.scaled_dot_product_attention(heads(completion_q, B), heads(row_k, B), heads(row_v, B),
                                                          attn_mask=layout.completion_bias)
        return torch.cat([y_prompt.transpose(1, 2).reshape(U * P, C), y_completion.transpose(1, 2).reshape(B * N, C)])


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = MLP(config)

    def forward(self, x: Tensor, mask: Tensor | SharedPrompts | None, kv_cache: KVCache | None,
                layer: int) -> Tensor:
        # x + attn(ln_1(x)), then + mlp(ln_2(...)); each LayerNorm (and the add before ln_2) in one
        # kernel that also casts to the matmul dtype (rookworld/model/layer_norm.py).
        dtype = matmul_dtype(x)
        x, h = add_layer_norm(x, self.attn(layer_norm_to(x, self.ln_1, dtype), mask, kv_cache, layer), self.ln_2, dtype)
        return x + self.mlp(h)


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.h = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        # With gradients on, keep only each block's input and recompute the block in backward:
        # ~1/10 of the activation memory for ~1/3 more forward compute.
        self.activation_checkpointing = False
        self.packed_attention = "sdpa"  # packed rows' attention: sdpa | flex (sft.pack_attention)
        self.init_weights()

    @classmethod
    def on_meta(cls, config: GPTConfig) -> GPT:
        """The model's shapes without storage or init (to be filled by load_state_dict(..., assign=True)).
        Skipping the init matters: on the meta device torch's init functions run through its Python
        reference kernels, whose first call imports torch._dynamo (~2 s of every process that loads a model)."""
        names = ("normal_", "uniform_", "kaiming_uniform_", "ones_", "zeros_")
        saved = {name: getattr(nn.init, name) for name in names}
        try:
            for name in names:
                setattr(nn.init, name, lambda tensor, *args, **kwargs: tensor)
            with torch.device("meta"):
                return cls(config)
        finally:
            for name, function in saved.items():
                setattr(nn.init, name, function)

    def init_weights(self, generator: torch.Generator | None = None) -> None:
        """GPT-2 init: weights N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 n_layer)), biases 0."""
        residual_std = 0.02 / (2 * self.config.n_layer) ** 0.5
        for name, param in self.named_parameters():
            if param.dim() == 2:
                std = residual_std if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(param, 0.0, std, generator=generator)
            elif name.endswith("weight"):  # LayerNorm gains
                nn.init.ones_(param)
            else:
                nn.init.zeros_(param)

    def hidden(self, input_ids: Tensor, position_ids: Tensor | None = None,
               attention_mask: Tensor | None = None, kv_cache: KVCache | None = None,
               segments: Tensor | None = None) -> Tensor:
        """Final-LayerNorm hidden states [B, T, C] for `input_ids` [B, T] (packed rows: `segments`)."""
        if segments is not None:
            if position_ids is None or attention_mask is not None or kv_cache is not None:
                raise ValueError("packed rows take position_ids and segments, no attention_mask or kv_cache")
            x = self.wte(input_ids) + self.wpe(position_ids)
            return self.ln_f(self.blocks(x, self.document_attention(segments), None))
        T = input_ids.shape[1]
        past = kv_cache.length if kv_cache is not None else 0
        if attention_mask is not None and attention_mask.shape[1] != past + T:
            raise ValueError(f"attention_mask covers {attention_mask.shape[1]} positions, expected {past + T}")
        if position_ids is None:
            position_ids = default_positions(attention_mask, past, T, input_ids.device)
        mask = attention_mask_4d(attention_mask, past, T, input_ids.device)
        x = self.blocks(self.wte(input_ids) + self.wpe(position_ids), mask, kv_cache)
        if kv_cache is not None:
            kv_cache.advance(T)
        return self.ln_f(x)

    def completion_hidden(self, prompt_ids: Tensor, prompt_mask: Tensor, prompt_positions: Tensor, group: Tensor,
                          completion_ids: Tensor, completion_mask: Tensor, completion_positions: Tensor,
                          broadcast_width: int = 0) -> Tensor:
        """Final-LayerNorm hidden states [B, N, C] that predict completion tokens [B, N]: position t holds
        the state after the prompt and completion tokens before t. Prompts [U, P] are left-padded and run
        once each; completion row b continues prompt group[b] (`broadcast_width` G > 0 promises the regular
        layout group = [0]*G + [1]*G + ..., which runs faster). Equals `hidden` on each row's prompt +
        completion (the GRPO group's G rows share one prompt: ~G times less prompt compute)."""
        (U, P), (B, N) = prompt_ids.shape, completion_ids.shape
        layout = SharedPrompts.build(prompt_mask, group, completion_mask, broadcast_width, matmul_dtype(self.wte.weight))
        ids = torch.cat([prompt_ids.reshape(-1), completion_ids.reshape(-1)])[None]
        positions = torch.cat([prompt_positions.reshape(-1), completion_positions.reshape(-1)])[None]
        x = self.blocks(self.wte(ids) + self.wpe(positions), layout, None)[0]
        last_prompt = x[:U * P].view(U, P, -1)[:, -1][group]  # predicts the first completion token
        before = x[U * P:].view(B, N, -1)[:, :-1]
        return self.ln_f(torch.cat([last_prompt[:, None], before], dim=1))

    def document_attention(self, segments: Tensor) -> Tensor | FlexDocuments:
        """The attention of packed rows: causal within each token's document (`segments` [B, T])."""
        if self.packed_attention == "flex":
            return FlexDocuments.build(segments)
        same = segments[:, :, None] == segments[:, None, :]
        causal = torch.ones(same.shape[1:], dtype=torch.bool, device=segments.device).tril()
        return attention_bias((same & causal)[:, None], matmul_dtype(self.wte.weight))

    def blocks(self, x: Tensor, mask: Tensor | SharedPrompts | FlexDocuments | None,
               kv_cache: KVCache | None) -> Tensor:
        recompute = self.activation_checkpointing and torch.is_grad_enabled() and kv_cache is None
        for layer, block in enumerate(self.h):
            if recompute:
                # No RNG state to preserve (no dropout); saving it would also break CUDA-graph capture.
                x = checkpoint(block, x, mask, None, layer, use_reentrant=False, preserve_rng_state=False)
            else:
                x = block(x, mask, kv_cache, layer)
        return x

    def unembed(self, hidden: Tensor) -> Tensor:
        """Logits from hidden states: the output projection is the token embedding (tied)."""
        return F.linear(hidden, self.wte.weight)

    def forward(self, input_ids: Tensor, position_ids: Tensor | None = None,
                attention_mask: Tensor | None = None, kv_cache: KVCache | None = None,
                segments: Tensor | None = None) -> Tensor:
        """Logits [B, T, V]."""
        return self.unembed(self.hidden(input_ids, position_ids, attention_mask, kv_cache, segments))


def default_positions(attention_mask: Tensor | None, past: int, T: int, device: torch.device) -> Tensor:
    """Positions count real tokens only (cumsum(mask) - 1), so left padding does not shift them."""
    if attention_mask is None:
        return torch.arange(past, past + T, device=device)[None]
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, past:]


def attention_mask_4d(attention_mask: Tensor | None, past: int, T: int, device: torch.device) -> Tensor | None:
    """Boolean [B|1, 1, T, past+T] mask: causal, and real keys only. None means plain causal."""
    if attention_mask is None and past == 0:
        return None
    key = torch.arange(past + T, device=device)
    query = torch.arange(past, past + T, device=device)[:, None]
    mask = (key <= query)[None]  # [1, T, S]
    if attention_mask is not None:
        # A padding query would see no key at all (softmax of nothing = NaN); let it see itself.
        # Its output is garbage that no real token attends to.
        mask = mask & (attention_mask[:, None, :] | (key == query)[None])
    return mask[:, None]


def matmul_dtype(tensor: Tensor) -> torch.dtype:
    """The dtype matrix products (and attention) run in for `tensor`: autocast's when it is on, else its own."""
    if torch.is_autocast_enabled(tensor.device.type):
        return torch.get_autocast_dtype(tensor.device.type)
    return tensor.dtype


def attention_bias(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """Boolean mask [..., S] (True = visible) -> additive 0 / -inf in `dtype`, each row of S stored
    16-element aligned (a view of a padded buffer). Memory-efficient attention reads this as it is;
    given a boolean mask, or an unaligned one, it would convert and pad it on every call (forward and
    recomputation of every layer)."""
    S = mask.shape[-1]
    padded = torch.zeros(*mask.shape[:-1], -(-S // ALIGN_BIAS) * ALIGN_BIAS, dtype=dtype, device=mask.device)
    return padded[..., :S].masked_fill_(~mask, float("-inf"))
