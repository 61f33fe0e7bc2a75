"""Triton kernels of the CUDA decode step (rookworld.model.fast_sampling), one launch per job.

The decode step is ~100 small launches per token on a 64-row batch: every kernel here is written so
that it reads its bytes once, in wide contiguous loads, and so that no launch exists only to finish
another one's work.

- `linear_partials`: x [M, K] @ W[N, K]^T split over K into float32 partial sums [S, M, N] (no bias).
  A 64-row product reads far fewer activation bytes than weight bytes, so the weights are spread
  over enough programs (N tiles x K splits) to keep every SM streaming; the consumer adds the S
  partials and the bias as it loads them, so split-K needs no reduction launch.
- `linear_gelu`: x @ W^T + bias through tanh-GELU, written in x's dtype (the MLP's first product).
- `embed_layernorm`, `add_layernorm`: the float32 residual stream x [B, C] gets the token and
  position embeddings (first) or a sublayer's partial sums + bias added in place, and the next
  LayerNorm's output is written in the matmul dtype.
- `decode_attention`: one new token per row against the cached keys/values, a program per row and
  head with an online softmax (splitting a row's keys over programs, flash-decoding style, measured
  slower at these lengths: docs/lab/performance-versions.md). q, k, v of the new token are the c_attn partial
  sums + bias; k and v are written to the row's completion cache at `step`. Caches are head-major
  ([rows, heads, positions, head_dim]), so each program streams contiguous blocks. The keys are the
  prompt's real tokens (prompt cache of the row's `leader`: the G completions of a GRPO group share
  one copy; left padding is skipped, not masked), then the row's completion so far, then the new
  token itself. Lengths are read on the device.
- `sample_and_record`: greedy or temperature sampling exactly as torch.multinomial draws one
  sample (argmax of softmax / Exponential(1) noise drawn by torch beforehand), then the per-row
  bookkeeping of `StaticDecoder._record`: output token (pad once finished), log-prob, active flag,
  finished update, position of the token fed next.

On Hopper and later the step's kernels use programmatic dependent launch (PDL): each one may start
while its predecessor finishes, does what needs no earlier result (a product's first weight tile,
a LayerNorm's parameters), then waits on the device (`gdc_wait`) before touching anything an earlier
kernel writes or reads. Every kernel waits before it ends, so the ordering stays transitive.

Every kernel has a plain PyTorch twin in fast_sampling.py (the CPU path and the reference); the
tests run both under TRITON_INTERPRET=1 where triton is installed.
"""
from __future__ import annotations

import functools
import os

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:
    triton = None

ATTENTION_BLOCK = 32  # keys per iteration
ATTENTION_WARPS = 2
SAMPLE_CHUNK = 4096  # vocabulary columns per program of the first sampling pass
LINEAR_BLOCK_N = 32  # output columns per program of the decode products
LINEAR_BLOCK_K = 256  # reduction depth per iteration
LINEAR_PROGRAMS = 132  # aim for about this many programs per product (one per SM of an H100)
LINEAR_MAX_SPLITS = 8
LINEAR_HALF_DEPTH_BELOW = LINEAR_PROGRAMS // 2  # a product with fewer programs splits K half as deep (0: never)
LINEAR_WARPS = 4
NORM_WARPS = 4
USE_PDL = True  # programmatic dependent launch where the GPU has it (Hopper+; not the interpreter)
PDL_TRIGGER = True  # also let the next kernel launch as soon as this one has waited (its prologue
# then overlaps this kernel's work: docs/lab/performance-versions.md)
LOG2E = 1.4426950408889634


def kernels_available(device: torch.device) -> bool:
    """Triton on CUDA (any head size: attention pads it to a power of two with masked loads and stores)."""
    return triton is not None and device.type == "cuda"


@functools.cache
def pdl_supported(device_index: int) -> bool:
    return os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.get_device_capability(device_index)[0] >= 9


def _pdl(tensor: Tensor) -> dict:
    """Launch options and constexprs for programmatic dependent launch on tensor's device."""
    on = USE_PDL and tensor.device.type == "cuda" and pdl_supported(tensor.device.index or 0)
    return dict(PDL=on, TRIGGER=on and PDL_TRIGGER, launch_pdl=on)


def split_count(n: int, k: int) -> int:
    """K splits for an [*, k] @ [k, n] decode product: enough programs to fill the GPU, each split
    at least one LINEAR_BLOCK_K deep, or half that where the product would have too few programs
    (narrow models: rookworld_tiny's c_attn and c_proj)."""
    tiles = triton.cdiv(n, LINEAR_BLOCK_N)
    wanted = max(1, round(LINEAR_PROGRAMS / tiles))
    splits = min(wanted, LINEAR_MAX_SPLITS, k // LINEAR_BLOCK_K)
    if tiles * splits < LINEAR_HALF_DEPTH_BELOW:
        splits = min(wanted, LINEAR_MAX_SPLITS, k // (LINEAR_BLOCK_K // 2))
    return max(1, splits)


def linear_partials(x: Tensor, weight: Tensor, partials: Tensor) -> None:
    """partials[s] = x[:, K_s] @ weight[:, K_s]^T (float32) for the S = partials.shape[0] K-splits."""
    _launch_linear(x, weight, weight, partials, splits=partials.shape[0], gelu=False)


def linear_gelu(x: Tensor, weight: Tensor, bias: Tensor, out: Tensor) -> None:
    """out = gelu_tanh(x @ weight^T + bias) in out's dtype."""
    _launch_linear(x, weight, bias, out, splits=1, gelu=True)


def _launch_linear(x: Tensor, weight: Tensor, bias: Tensor, out: Tensor, splits: int, gelu: bool) -> None:
    M, K = x.shape
    N = weight.shape[0]
    block_m = min(64, max(16, triton.next_power_of_2(M)))
    depth = triton.cdiv(K, splits)
    block_k = min(LINEAR_BLOCK_K, triton.next_power_of_2(depth))  # a shallow split: a shallower tile
    iters = triton.cdiv(depth, block_k)
    grid = (triton.cdiv(N, LINEAR_BLOCK_N), triton.cdiv(M, block_m), splits)
    _linear[grid](x, weight, bias, out, M, N, K, x.stride(0), ITERS=iters, GELU=gelu,
                  IEEE=x.dtype == torch.float32, BLOCK_M=block_m, BLOCK_N=LINEAR_BLOCK_N,
                  BLOCK_K=block_k, num_warps=LINEAR_WARPS, **_pdl(x))


def embed_layernorm(x: Tensor, wte: Tensor, wpe: Tensor, tokens: Tensor, positions: Tensor, weight: Tensor,
                    bias: Tensor, out: Tensor, eps: float) -> None:
    """x = wte[tokens] + wpe[positions] (float32); out = LayerNorm(x) in out's dtype."""
    B, C = x.shape
    _residual_layernorm[(B,)](x, x, x, wte, wpe, tokens, positions, weight, bias, out, B, C, eps,
                              EMBED=True, SPLITS=1, BLOCK_C=triton.next_power_of_2(C), num_warps=NORM_WARPS,
                              **_pdl(x))


def add_layernorm(x: Tensor, partials: Tensor, y_bias: Tensor, weight: Tensor, bias: Tensor, out: Tensor,
                  eps: float) -> None:
    """x += sum(partials) + y_bias (in place, float32); out = LayerNorm(x) in out's dtype."""
    B, C = x.shape
    _residual_layernorm[(B,)](x, partials, y_bias, x, x, x, x, weight, bias, out, B, C, eps, EMBED=False,
                              SPLITS=partials.shape[0], BLOCK_C=triton.next_power_of_2(C), num_warps=NORM_WARPS,
                              **_pdl(x))


def decode_attention(qkv_partials: Tensor, qkv_bias: Tensor, prompt_kv: Tensor, row_start: Tensor, leader: Tensor,
                     completion_kv: Tensor, step: Tensor, out: Tensor) -> None:
    """qkv_partials [S, B, 3C] float32 and qkv_bias [3C]: the new tokens' q|k|v; prompt_kv
    [2, U, H, P_cap, D]; row_start [B] (first real column of the row's prompt); leader [B];
    step [1]; completion_kv [2, B, H, N_cap, D]; out [B, C]."""
    B, C = out.shape
    _, _, H, N_cap, D = completion_kv.shape
    _decode_attention[(B, H)](
        qkv_partials, qkv_bias, prompt_kv, row_start, leader, completion_kv, step, out,
        B, prompt_kv.shape[3], N_cap, prompt_kv.stride(0), completion_kv.stride(0), D ** -0.5 * LOG2E,
        H=H, D=D, D_PAD=triton.next_power_of_2(D), QKV_SPLITS=qkv_partials.shape[0], BLOCK=ATTENTION_BLOCK, num_warps=ATTENTION_WARPS, **_pdl(out))


def sample_and_record(logits: Tensor, noise: Tensor, temperature: float, greedy: bool, finished: Tensor,
                      caps: Tensor, stops: Tensor, n_stops: int, step: Tensor, pad_id: int, out_tokens: Tensor,
                      out_logprobs: Tensor, out_active: Tensor, emitted: Tensor, position: Tensor,
                      fed_position: Tensor, vocab: int) -> None:
    """Two launches: (rows x vocabulary chunks) partial log-sum-exp and argmax, then per row the
    combination and the bookkeeping. Sampling maximises z / T - log(noise), the log of torch's
    probs / noise (same order, so the same token up to float rounding of near-ties). Non-finite logits
    in an active row give it a NaN log-prob (and an in-vocabulary token), with no host sync."""
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
    def _linear(x_ptr, w_ptr, bias_ptr, out_ptr, M, N, K, x_stride, ITERS: tl.constexpr, GELU: tl.constexpr,
                IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                PDL: tl.constexpr, TRIGGER: tl.constexpr):
        """Program (n tile, m tile, split): rows x columns of x @ W^T over K in [split, split + 1) x
        ITERS x BLOCK_K. Up to four weight tiles (the split's whole depth in every shape we run) are
        loaded before waiting on the previous kernel: with PDL they stream in while it finishes, and
        after the wait only the activations (in L2) are read. Deeper splits load one tile ahead."""
        rows = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        first = tl.program_id(2) * ITERS * BLOCK_K
        end = tl.minimum(first + ITERS * BLOCK_K, K)
        w_rows = w_ptr + cols[:, None] * K
        x_rows = x_ptr + rows[:, None] * x_stride
        ks = first + tl.arange(0, BLOCK_K)
        w0 = _tile(w_rows, cols[:, None] < N, ks, end)
        if ITERS <= 4:
            if ITERS > 1:
                w1 = _tile(w_rows, cols[:, None] < N, ks + BLOCK_K, end)
            if ITERS > 2:
                w2 = _tile(w_rows, cols[:, None] < N, ks + 2 * BLOCK_K, end)
            if ITERS > 3:
                w3 = _tile(w_rows, cols[:, None] < N, ks + 3 * BLOCK_K, end)
        if PDL:
            gdc_wait()
            if TRIGGER:
                gdc_launch_dependents()
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if ITERS <= 4:
            acc = _dot(_tile(x_rows, rows[:, None] < M, ks, end), w0, acc, IEEE)
            if ITERS > 1:
                acc = _dot(_tile(x_rows, rows[:, None] < M, ks + BLOCK_K, end), w1, acc, IEEE)
            if ITERS > 2:
                acc = _dot(_tile(x_rows, rows[:, None] < M, ks + 2 * BLOCK_K, end), w2, acc, IEEE)
            if ITERS > 3:
                acc = _dot(_tile(x_rows, rows[:, None] < M, ks + 3 * BLOCK_K, end), w3, acc, IEEE)
        else:
            w_next = w0
            for start in range(first, end, BLOCK_K):
                ks = start + tl.arange(0, BLOCK_K)
                w = w_next
                w_next = _tile(w_rows, cols[:, None] < N, ks + BLOCK_K, end)
                acc = _dot(_tile(x_rows, rows[:, None] < M, ks, end), w, acc, IEEE)
        valid = (rows[:, None] < M) & (cols[None, :] < N)
        if GELU:
            acc += tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
            inner = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)
            acc = 0.5 * acc * (1.0 + (2.0 * tl.sigmoid(2.0 * inner) - 1.0))  # tanh(u) = 2 sigmoid(2u) - 1
            tl.store(out_ptr + rows[:, None] * N + cols[None, :], acc.to(out_ptr.dtype.element_ty), mask=valid)
        else:
            tl.store(out_ptr + (tl.program_id(2) * M + rows[:, None]) * N + cols[None, :], acc, mask=valid)

    @triton.jit
    def _tile(row_ptrs, row_mask, ks, end):
        """[rows, BLOCK_K] tile of a row-major matrix at columns ks (zeros at and past `end`)."""
        return tl.load(row_ptrs + ks[None, :], mask=row_mask & (ks[None, :] < end), other=0.0)

    @triton.jit
    def _dot(a, w, acc, IEEE: tl.constexpr):
        """acc + a @ w^T (exact float32 products for float32 inputs: the CPU reference's precision)."""
        if IEEE:
            return tl.dot(a, tl.trans(w), acc, input_precision="ieee")
        return tl.dot(a, tl.trans(w), acc)

    @triton.jit
    def _residual_layernorm(x_ptr, partials_ptr, y_bias_ptr, wte_ptr, wpe_ptr, tokens_ptr, positions_ptr, w_ptr,
                            b_ptr, out_ptr, B, C, eps, EMBED: tl.constexpr, SPLITS: tl.constexpr,
                            BLOCK_C: tl.constexpr, PDL: tl.constexpr, TRIGGER: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK_C)
        valid = cols < C
        w = tl.load(w_ptr + cols, mask=valid, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=valid, other=0.0).to(tl.float32)
        if PDL:
            gdc_wait()
            if TRIGGER:
                gdc_launch_dependents()
        if EMBED:
            token = tl.load(tokens_ptr + row)
            position = tl.load(positions_ptr + row)
            x = tl.load(wte_ptr + token * C + cols, mask=valid, other=0.0).to(tl.float32) \
                + tl.load(wpe_ptr + position * C + cols, mask=valid, other=0.0).to(tl.float32)
        else:
            x = tl.load(x_ptr + row * C + cols, mask=valid, other=0.0) \
                + tl.load(y_bias_ptr + cols, mask=valid, other=0.0).to(tl.float32)
            for s in tl.static_range(SPLITS):
                x += tl.load(partials_ptr + (s * B + row) * C + cols, mask=valid, other=0.0)
        tl.store(x_ptr + row * C + cols, x, mask=valid)
        mean = tl.sum(x, 0) / C
        centred = tl.where(valid, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, 0) / C + eps)
        tl.store(out_ptr + row * C + cols, (centred * rstd * w + b).to(out_ptr.dtype.element_ty), mask=valid)

    @triton.jit
    def _qkv_part(partials_ptr, bias_ptr, row, B, offset, dims, D: tl.constexpr, QKV_SPLITS: tl.constexpr,
                  C3: tl.constexpr):
        """One head's slice of q, k or v of the new token: the partial sums plus the bias, float32
        (zero in the padding columns past D)."""
        real = dims < D
        value = tl.load(bias_ptr + offset + dims, mask=real, other=0.0).to(tl.float32)
        for s in tl.static_range(QKV_SPLITS):
            value += tl.load(partials_ptr + (s * B + row) * C3 + offset + dims, mask=real, other=0.0)
        return value

    @triton.jit
    def _decode_attention(qkv_ptr, qkv_bias_ptr, prompt_kv_ptr, row_start_ptr, leader_ptr, comp_kv_ptr, step_ptr,
                          out_ptr, B, P_cap, N_cap, prompt_kv_stride, comp_kv_stride, scale,
                          H: tl.constexpr, D: tl.constexpr, D_PAD: tl.constexpr, QKV_SPLITS: tl.constexpr,
                          BLOCK: tl.constexpr, PDL: tl.constexpr, TRIGGER: tl.constexpr):
        """Program (row, head). Keys: the prompt's real tokens, then the row's completion so far, in
        blocks that never straddle the two caches (block j + 1 is loaded while j is reduced), and
        the new token, which sees itself. Scores are in log2 units (scale includes log2 e).
        The head dimension is spanned by D_PAD = next power of two >= D lanes; lanes past D load
        zeros (they add nothing to a score or an output) and store nothing."""
        row = tl.program_id(0).to(tl.int64)
        head = tl.program_id(1)
        dims = tl.arange(0, D_PAD)
        real = dims < D
        positions = tl.arange(0, BLOCK)
        C3: tl.constexpr = 3 * H * D
        # Before the wait: what no kernel of this step writes (the step, the row's prompt, its cache
        # so far), so with PDL the first key block streams in while c_attn finishes.
        step = tl.load(step_ptr)
        start = tl.load(row_start_ptr + row)
        n_prompt = P_cap - start  # prompts are right-aligned in the cache
        prompt = prompt_kv_ptr + ((tl.load(leader_ptr + row) * H + head) * P_cap + start) * D
        own = comp_kv_ptr + (row * H + head) * N_cap * D  # keys; values are comp_kv_stride further
        prompt_blocks = tl.cdiv(n_prompt, BLOCK)
        n_blocks = prompt_blocks + tl.cdiv(step, BLOCK)
        k_next, v_next, left_next = _kv_block(prompt, own, prompt_kv_stride, comp_kv_stride, 0, prompt_blocks,
                                              n_prompt, step, n_blocks, positions, dims, D, BLOCK)
        if PDL:
            gdc_wait()
            if TRIGGER:
                gdc_launch_dependents()
        q = _qkv_part(qkv_ptr, qkv_bias_ptr, row, B, head * D, dims, D, QKV_SPLITS, C3) * scale
        k_new = _qkv_part(qkv_ptr, qkv_bias_ptr, row, B, H * D + head * D, dims, D, QKV_SPLITS, C3)
        v_new = _qkv_part(qkv_ptr, qkv_bias_ptr, row, B, 2 * H * D + head * D, dims, D, QKV_SPLITS, C3)
        k_new = k_new.to(comp_kv_ptr.dtype.element_ty)  # the cache's precision, as later steps will see it
        v_new = v_new.to(comp_kv_ptr.dtype.element_ty)
        tl.store(own + step * D + dims, k_new, mask=real)
        tl.store(own + comp_kv_stride + step * D + dims, v_new, mask=real)
        running_max = tl.sum(q * k_new.to(tl.float32), 0)  # the new token sees itself: weight exp(0) = 1
        total = running_max * 0.0 + 1.0
        acc = v_new.to(tl.float32)
        for j in range(0, n_blocks):
            k, v, left = k_next, v_next, left_next
            k_next, v_next, left_next = _kv_block(prompt, own, prompt_kv_stride, comp_kv_stride, j + 1,
                                                  prompt_blocks, n_prompt, step, n_blocks, positions, dims, D, BLOCK)
            valid = positions < left
            scores = tl.where(valid, tl.sum(k.to(tl.float32) * q[None, :], 1), -float("inf"))
            new_max = tl.maximum(running_max, tl.max(scores, 0))
            rescale = tl.exp2(running_max - new_max)
            p = tl.exp2(scores - new_max)
            total = total * rescale + tl.sum(p, 0)
            acc = acc * rescale + tl.sum(p[:, None] * v.to(tl.float32), 0)
            running_max = new_max
        tl.store(out_ptr + row * H * D + head * D + dims, (acc / total).to(out_ptr.dtype.element_ty), mask=real)

    @triton.jit
    def _kv_block(prompt, own, prompt_kv_stride, comp_kv_stride, j, prompt_blocks, n_prompt, step, n_blocks,
                  positions, dims, D: tl.constexpr, BLOCK: tl.constexpr):
        """Keys, values and number of valid positions of block j (nothing past the last block)."""
        in_prompt = j < prompt_blocks
        first = tl.where(in_prompt, j, j - prompt_blocks) * BLOCK
        keys = tl.where(in_prompt, prompt, own) + first * D
        left = tl.where(j < n_blocks, tl.where(in_prompt, n_prompt, step) - first, 0)
        offsets = positions[:, None] * D + dims[None, :]
        mask = (positions < left)[:, None] & (dims < D)[None, :]
        k = tl.load(keys + offsets, mask=mask, other=0.0)
        v = tl.load(keys + tl.where(in_prompt, prompt_kv_stride, comp_kv_stride) + offsets, mask=mask, other=0.0)
        return k, v, left

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
        # A NaN key (non-finite logits) never wins, so the token stays a vocabulary id; the row's log-prob
        # is NaN all the same (z_max and the sum below see the NaN), which is how the trainer detects it.
        key = tl.where(key == key, key, -float("inf"))
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
