"""Triton kernels of the CUDA decode step (rookworld.model.fast_sampling), one launch per job:

- `embed_layernorm`, `add_layernorm`: the float32 residual stream x [B, C] gets the token and
  position embeddings (first) or a sublayer's output added in place, and the next LayerNorm's output
  is written in the matmul dtype. Replaces gather + add + layer_norm (+ cast) launches.
- `decode_attention`: one new token per row against the cached keys/values, flash-decoding style
  (each row and head split over several programs with a running max, then a combine launch): the
  row's prompt keys come from the prompt cache of its prompt (`leader`; the G completions of a
  GRPO group share one copy), then the row's own completion keys [0, step), then the new token
  itself, whose key and value are also written to the completion cache at `step`. No mask tensor,
  no cache-length buckets: lengths are read on the device.
- `sample_and_record`: greedy or temperature sampling exactly as torch.multinomial draws one
  sample (argmax of softmax / Exponential(1) noise drawn by torch beforehand), then the per-row
  bookkeeping of `StaticDecoder._record`: output token (pad once finished), log-prob, active flag,
  finished update, position of the token fed next.

Every kernel has a plain PyTorch twin in fast_sampling.py (the CPU path and the reference); the
tests run both under TRITON_INTERPRET=1 where triton is installed.
"""
from __future__ import annotations

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

ATTENTION_BLOCK = 64  # keys per iteration
ATTENTION_SPLITS = 4  # programs per (row, head), a power of two
SAMPLE_CHUNK = 4096  # vocabulary columns per program of the first sampling pass


def kernels_available(device: torch.device, head_dim: int) -> bool:
    """Triton on CUDA, and a power-of-two head size (the attention kernel spans it with tl.arange)."""
    return triton is not None and device.type == "cuda" and head_dim & (head_dim - 1) == 0


def embed_layernorm(x: Tensor, wte: Tensor, wpe: Tensor, tokens: Tensor, positions: Tensor, weight: Tensor,
                    bias: Tensor, out: Tensor, eps: float) -> None:
    """x = wte[tokens] + wpe[positions] (float32); out = LayerNorm(x) in out's dtype."""
    B, C = x.shape
    _residual_layernorm[(B,)](x, x, wte, wpe, tokens, positions, weight, bias, out, C, eps,
                              EMBED=True, BLOCK_C=triton.next_power_of_2(C))


def add_layernorm(x: Tensor, y: Tensor, weight: Tensor, bias: Tensor, out: Tensor, eps: float) -> None:
    """x += y (in place, float32); out = LayerNorm(x) in out's dtype."""
    B, C = x.shape
    _residual_layernorm[(B,)](x, y, x, x, x, x, weight, bias, out, C, eps, EMBED=False,
                              BLOCK_C=triton.next_power_of_2(C))


def decode_attention(qkv: Tensor, prompt_kv: Tensor, prompt_bias: Tensor, leader: Tensor, prompt_width: Tensor,
                     completion_kv: Tensor, step: Tensor, out: Tensor, n_head: int) -> None:
    """qkv [B, 3C] of the new tokens; prompt_kv [U, P_cap, 2C]; prompt_bias [U, P_cap] float32
    (0 / -inf); leader [B]; prompt_width, step [1]; completion_kv [B, N_cap, 2C]; out [B, C].
    Each (row, head) is split over ATTENTION_SPLITS programs (flash-decoding): a single program per
    row and head walks its keys one dependent load after another and leaves the memory system idle."""
    B, C = out.shape
    D = C // n_head
    partial = torch.empty(B, n_head, ATTENTION_SPLITS, D + 2, dtype=torch.float32, device=out.device)
    _decode_attention_split[(B, n_head, ATTENTION_SPLITS)](
        qkv, qkv.stride(0), prompt_kv, prompt_kv.stride(0), prompt_kv.stride(1), prompt_bias, prompt_bias.stride(0),
        leader, prompt_width, completion_kv, completion_kv.stride(0), completion_kv.stride(1), step, partial,
        D ** -0.5, C=C, D=D, SPLITS=ATTENTION_SPLITS, BLOCK=ATTENTION_BLOCK, num_warps=4)
    _decode_attention_combine[(B, n_head)](partial, out, out.stride(0), D=D, SPLITS=ATTENTION_SPLITS, num_warps=1)


def sample_and_record(logits: Tensor, noise: Tensor, temperature: float, greedy: bool, finished: Tensor,
                      caps: Tensor, stops: Tensor, n_stops: int, step: Tensor, pad_id: int, out_tokens: Tensor,
                      out_logprobs: Tensor, out_active: Tensor, emitted: Tensor, position: Tensor,
                      fed_position: Tensor, vocab: int) -> None:
    """Two launches: (rows x vocabulary chunks) partial log-sum-exp and argmax, then per row the
    combination and the bookkeeping. Sampling maximises z / T - log(noise), the log of torch's
    probs / noise (same order, so the same token up to float rounding of near-ties)."""
    B = logits.shape[0]
    chunks = triton.cdiv(vocab, SAMPLE_CHUNK)
    partial = torch.empty(4, B, chunks, dtype=torch.float32, device=logits.device)
    _sample_partial[(B, chunks)](logits, logits.stride(0), noise, noise.stride(0), vocab, temperature, partial,
                                 chunks, GREEDY=greedy, CHUNK=SAMPLE_CHUNK, num_warps=8)
    _sample_finish[(B,)](partial, chunks, logits, logits.stride(0), temperature, finished, caps, stops, step,
                         pad_id, out_tokens, out_logprobs, out_active, out_tokens.stride(0), emitted, position,
                         fed_position, GREEDY=greedy, N_STOPS=n_stops, CHUNKS=triton.next_power_of_2(chunks))


if triton is not None:
    @triton.jit
    def _residual_layernorm(x_ptr, y_ptr, wte_ptr, wpe_ptr, tokens_ptr, positions_ptr, w_ptr, b_ptr, out_ptr,
                            C, eps, EMBED: tl.constexpr, BLOCK_C: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_C)
        valid = cols < C
        if EMBED:
            token = tl.load(tokens_ptr + row)
            position = tl.load(positions_ptr + row)
            x = tl.load(wte_ptr + token * C + cols, mask=valid, other=0.0).to(tl.float32) \
                + tl.load(wpe_ptr + position * C + cols, mask=valid, other=0.0).to(tl.float32)
        else:
            x = tl.load(x_ptr + row * C + cols, mask=valid, other=0.0) \
                + tl.load(y_ptr + row * C + cols, mask=valid, other=0.0).to(tl.float32)
        tl.store(x_ptr + row * C + cols, x, mask=valid)
        mean = tl.sum(x, 0) / C
        centred = tl.where(valid, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, 0) / C + eps)
        w = tl.load(w_ptr + cols, mask=valid, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=valid, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * C + cols, (centred * rstd * w + b).to(out_ptr.dtype.element_ty), mask=valid)

    @triton.jit
    def _decode_attention_split(qkv_ptr, qkv_stride, prompt_kv_ptr, prompt_row_stride, prompt_pos_stride,
                                prompt_bias_ptr, bias_stride, leader_ptr, prompt_width_ptr, comp_kv_ptr,
                                comp_row_stride, comp_pos_stride, step_ptr, partial_ptr, scale,
                                C: tl.constexpr, D: tl.constexpr, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
        """Keys 0..width-1 are the prompt's (prompt cache of the row's leader), width..width+step-1 the
        row's completion so far; split `split` takes its share of them, split 0 also the new token
        (whose key and value it writes to the completion cache). Output: running max, sum, weighted
        values of the split, for the combine kernel."""
        row = tl.program_id(0).to(tl.int64)
        head = tl.program_id(1)
        split = tl.program_id(2)
        dims = tl.arange(0, D)
        token = qkv_ptr + row * qkv_stride + head * D + dims
        q = tl.load(token).to(tl.float32) * scale
        step = tl.load(step_ptr)
        width = tl.load(prompt_width_ptr)
        leader = tl.load(leader_ptr + row).to(tl.int64)
        own = comp_kv_ptr + row * comp_row_stride + head * D
        if split == 0:
            k_new = tl.load(token + C)
            v_new = tl.load(token + 2 * C)
            tl.store(own + step * comp_pos_stride + dims, k_new)
            tl.store(own + step * comp_pos_stride + C + dims, v_new)
            running_max = tl.sum(q * k_new.to(tl.float32), 0)  # the new token sees itself: weight exp(0) = 1
            total = running_max * 0.0 + 1.0
            acc = v_new.to(tl.float32)
        else:
            running_max = tl.sum(q, 0) * 0.0 - 1e30  # finite: fully masked blocks must not give inf - inf
            total = running_max * 0.0
            acc = q * 0.0
        n_keys = width + step
        share = tl.cdiv(n_keys, SPLITS)
        first = split * share
        last = tl.minimum(first + share, n_keys)
        prompt = prompt_kv_ptr + leader * prompt_row_stride + head * D
        for start in range(first, last, BLOCK):
            index = start + tl.arange(0, BLOCK)
            valid = index < last
            in_prompt = index < width
            base = tl.where(in_prompt, prompt + index * prompt_pos_stride, own + (index - width) * comp_pos_stride)
            k = tl.load(base[:, None] + dims[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
            v = tl.load(base[:, None] + C + dims[None, :], mask=valid[:, None], other=0.0).to(tl.float32)
            bias = tl.load(prompt_bias_ptr + leader * bias_stride + index, mask=valid & in_prompt, other=0.0)
            scores = tl.where(valid, tl.sum(k * q[None, :], 1) + bias, -float("inf"))
            new_max = tl.maximum(running_max, tl.max(scores, 0))
            rescale = tl.exp(running_max - new_max)
            p = tl.exp(scores - new_max)
            total = total * rescale + tl.sum(p, 0)
            acc = acc * rescale + tl.sum(p[:, None] * v, 0)
            running_max = new_max
        out = partial_ptr + ((row * tl.num_programs(1) + head) * SPLITS + split) * (D + 2)
        tl.store(out + dims, acc)
        tl.store(out + D, running_max)
        tl.store(out + D + 1, total)

    @triton.jit
    def _decode_attention_combine(partial_ptr, out_ptr, out_stride, D: tl.constexpr, SPLITS: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        head = tl.program_id(1)
        splits = tl.arange(0, SPLITS)
        dims = tl.arange(0, D)
        base = partial_ptr + ((row * tl.num_programs(1) + head) * SPLITS + splits) * (D + 2)
        maxima = tl.load(base + D)
        totals = tl.load(base + D + 1)
        acc = tl.load(base[:, None] + dims[None, :])
        weights = tl.exp(maxima - tl.max(maxima, 0))
        y = tl.sum(acc * weights[:, None], 0) / tl.sum(totals * weights, 0)
        tl.store(out_ptr + row * out_stride + head * D + dims, y.to(out_ptr.dtype.element_ty))

    @triton.jit
    def _sample_partial(logits_ptr, logits_stride, noise_ptr, noise_stride, vocab, temperature, partial_ptr, chunks,
                        GREEDY: tl.constexpr, CHUNK: tl.constexpr):
        """partial[:, row, chunk] = (max z, sum exp(z - max), best key, its column) over one chunk."""
        row = tl.program_id(0).to(tl.int64)
        chunk = tl.program_id(1)
        cols = chunk * CHUNK + tl.arange(0, CHUNK)
        valid = cols < vocab
        z = tl.load(logits_ptr + row * logits_stride + cols, mask=valid, other=-float("inf")).to(tl.float32)
        if GREEDY:
            key = z
        else:
            z = z / temperature
            noise = tl.load(noise_ptr + row * noise_stride + cols, mask=valid, other=1.0)
            key = tl.where(valid, z - tl.log(noise), -float("inf"))
        z_max = tl.max(z, 0)
        out = partial_ptr + row * chunks + chunk
        stride = tl.num_programs(0) * chunks
        tl.store(out, z_max)
        tl.store(out + stride, tl.sum(tl.exp(z - z_max), 0))
        tl.store(out + 2 * stride, tl.max(key, 0))
        tl.store(out + 3 * stride, (tl.argmax(key, 0) + chunk * CHUNK).to(tl.float32))

    @triton.jit
    def _sample_finish(partial_ptr, chunks, logits_ptr, logits_stride, temperature, finished_ptr, caps_ptr,
                       stops_ptr, step_ptr, pad_id, out_tokens_ptr, out_logprobs_ptr, out_active_ptr, out_stride,
                       emitted_ptr, position_ptr, fed_position_ptr,
                       GREEDY: tl.constexpr, N_STOPS: tl.constexpr, CHUNKS: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        index = tl.arange(0, CHUNKS)
        valid = index < chunks
        base = partial_ptr + row * chunks + index
        stride = tl.num_programs(0) * chunks
        maxima = tl.load(base, mask=valid, other=-float("inf"))
        sums = tl.load(base + stride, mask=valid, other=0.0)
        keys = tl.load(base + 2 * stride, mask=valid, other=-float("inf"))
        columns = tl.load(base + 3 * stride, mask=valid, other=0.0)
        z_max = tl.max(maxima, 0)
        lse = z_max + tl.log(tl.sum(sums * tl.exp(maxima - z_max), 0))
        best = tl.argmax(keys, 0)  # first chunk holding the largest key: torch's first-index tie-break
        token = tl.sum(tl.where(index == best, columns, 0.0), 0).to(tl.int64)
        z_token = tl.load(logits_ptr + row * logits_stride + token).to(tl.float32)
        if not GREEDY:
            z_token = z_token / temperature
        step = tl.load(step_ptr)
        active = tl.load(finished_ptr + row) == 0
        emitted = tl.where(active, token, pad_id)
        out = row * out_stride + step
        tl.store(out_tokens_ptr + out, emitted)
        tl.store(out_logprobs_ptr + out, tl.where(active, z_token - lse, 0.0))
        tl.store(out_active_ptr + out, active)
        done = step + 1 >= tl.load(caps_ptr + row)
        for i in tl.static_range(N_STOPS):
            done = done | (token == tl.load(stops_ptr + i))
        tl.store(finished_ptr + row, (active == 0) | done)
        tl.store(emitted_ptr + row, emitted)
        position = tl.load(position_ptr + row)
        tl.store(fed_position_ptr + row, position)
        tl.store(position_ptr + row, position + active.to(tl.int64))
