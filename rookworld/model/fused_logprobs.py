"""Token log-probs and entropies straight from hidden states, fused (Triton), for the CUDA path.

`fused_token_logprobs(hidden [N, C], weight [V, C], targets [N], temperature)` returns float32
log p(target) and the entropy of every row's distribution softmax(hidden @ weight.T / temperature).
Rows go through in chunks of `chunk_rows`: one matrix product gives the chunk's logits in the input
dtype (bf16 under the trainer's autocast), one Triton kernel reads them once and keeps a running
max, sum of exponentials and sum of p * z in float32. No float32 [N, V] tensor exists; backward
recomputes each chunk's logits and writes their gradient in one more pass:

    d logp / dz_j = [j = target] - p_j        d H / dz_j = -p_j (log p_j + H)

The plain chunked path (rookworld.model.logprobs) casts each chunk to float32, scales it, takes
log_softmax, then exp and a product for the entropy: about ten passes over a float32 chunk forward
and as many again backward. Both agree to float32 rounding on the same logits.
"""

from __future__ import annotations

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the plain path is used
    triton = None

BLOCK = 4096  # vocabulary columns per inner iteration
VOCAB_ALIGN = 64  # the output projection is padded to a multiple of this many rows


def fused_available(device: torch.device) -> bool:
    return triton is not None and device.type == "cuda"


def fused_token_logprobs(hidden: Tensor, weight: Tensor, targets: Tensor, temperature: float = 1.0,
                         chunk_rows: int = 512) -> tuple[Tensor, Tensor]:
    """(log-probs [N], entropies [N]) float32 of `targets` under softmax(hidden @ weight.T / temperature)."""
    if triton is None:
        raise RuntimeError("fused_token_logprobs needs triton")
    vocab = weight.shape[0]
    padding = -vocab % VOCAB_ALIGN  # aligned rows keep cuBLAS on its fast kernels
    padded = torch.nn.functional.pad(weight, (0, 0, 0, padding)) if padding else weight
    return FusedTokenLogprobs.apply(hidden, padded, targets, 1.0 / temperature, chunk_rows, vocab)


class FusedTokenLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, targets: Tensor, inv_temperature: float,
                chunk_rows: int, vocab: int) -> tuple[Tensor, Tensor]:
        """`weight` may have padding rows past `vocab`: their logits are ignored."""
        n_rows = hidden.shape[0]
        logp, entropy, lse = (torch.empty(n_rows, dtype=torch.float32, device=hidden.device) for _ in range(3))
        for start in range(0, n_rows, chunk_rows):
            rows = slice(start, min(start + chunk_rows, n_rows))
            logits = hidden[rows] @ weight.t()
            _logprobs_fwd[(logits.shape[0],)](
                logits, logits.stride(0), targets[rows], logp[rows], entropy[rows], lse[rows], vocab,
                inv_temperature, BLOCK=BLOCK, num_warps=8)
        ctx.save_for_backward(hidden, weight, targets, lse, entropy)
        ctx.inv_temperature, ctx.chunk_rows, ctx.vocab = inv_temperature, chunk_rows, vocab
        return logp, entropy

    @staticmethod
    def backward(ctx, grad_logp: Tensor | None, grad_entropy: Tensor | None):
        hidden, weight, targets, lse, entropy = ctx.saved_tensors
        n_rows = hidden.shape[0]
        zeros = torch.zeros(n_rows, dtype=torch.float32, device=hidden.device)
        grad_logp = zeros if grad_logp is None else grad_logp.float().contiguous()
        has_entropy_grad = grad_entropy is not None
        grad_entropy = zeros if grad_entropy is None else grad_entropy.float().contiguous()
        grad_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        # accumulated in the weight's dtype, as autograd accumulates the plain path's chunks
        grad_weight = torch.zeros_like(weight) if ctx.needs_input_grad[1] else None
        for start in range(0, n_rows, ctx.chunk_rows):
            rows = slice(start, min(start + ctx.chunk_rows, n_rows))
            logits = hidden[rows] @ weight.t()
            grad_logits = torch.empty_like(logits)
            _logprobs_bwd[(logits.shape[0],)](
                logits, logits.stride(0), targets[rows], lse[rows], entropy[rows], grad_logp[rows],
                grad_entropy[rows], grad_logits, grad_logits.stride(0), ctx.vocab, logits.shape[1], ctx.inv_temperature,
                HAS_ENTROPY_GRAD=has_entropy_grad, BLOCK=BLOCK, num_warps=8)
            if grad_hidden is not None:
                torch.mm(grad_logits, weight, out=grad_hidden[rows])
            if grad_weight is not None:
                grad_weight.addmm_(grad_logits.t(), hidden[rows])
        return grad_hidden, grad_weight, None, None, None, None


if triton is not None:
    @triton.jit
    def _logprobs_fwd(logits_ptr, stride, targets_ptr, logp_ptr, entropy_ptr, lse_ptr, vocab,
                      inv_temperature, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        base = logits_ptr + row.to(tl.int64) * stride
        running_max = -float("inf")
        sum_exp = 0.0
        sum_exp_z = 0.0
        for start in range(0, vocab, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            valid = cols < vocab
            z = tl.load(base + cols, mask=valid, other=-float("inf")).to(tl.float32) * inv_temperature
            new_max = tl.maximum(running_max, tl.max(z, 0))
            rescale = tl.exp(running_max - new_max)
            e = tl.exp(z - new_max)
            sum_exp = sum_exp * rescale + tl.sum(e, 0)
            sum_exp_z = sum_exp_z * rescale + tl.sum(e * tl.where(valid, z, 0.0), 0)  # no 0 * -inf
            running_max = new_max
        lse = running_max + tl.log(sum_exp)
        target = tl.load(targets_ptr + row)
        z_target = tl.load(base + target).to(tl.float32) * inv_temperature
        tl.store(logp_ptr + row, z_target - lse)
        tl.store(entropy_ptr + row, lse - sum_exp_z / sum_exp)
        tl.store(lse_ptr + row, lse)

    @triton.jit
    def _logprobs_bwd(logits_ptr, stride, targets_ptr, lse_ptr, entropy_ptr, grad_logp_ptr, grad_entropy_ptr,
                      grad_logits_ptr, grad_stride, vocab, n_cols, inv_temperature,
                      HAS_ENTROPY_GRAD: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        base = logits_ptr + row.to(tl.int64) * stride
        out = grad_logits_ptr + row.to(tl.int64) * grad_stride
        lse = tl.load(lse_ptr + row)
        entropy = tl.load(entropy_ptr + row)
        g_logp = tl.load(grad_logp_ptr + row)
        g_entropy = tl.load(grad_entropy_ptr + row)
        target = tl.load(targets_ptr + row)
        for start in range(0, n_cols, BLOCK):  # padding columns get a zero gradient
            cols = start + tl.arange(0, BLOCK)
            valid = cols < vocab
            logp = tl.load(base + cols, mask=valid, other=0.0).to(tl.float32) * inv_temperature - lse
            p = tl.where(valid, tl.exp(logp), 0.0)
            grad = -g_logp * p
            if HAS_ENTROPY_GRAD:
                grad -= g_entropy * p * (logp + entropy)
            grad = tl.where(cols == target, grad + g_logp, grad) * inv_temperature
            tl.store(out + cols, grad.to(grad_logits_ptr.dtype.element_ty), mask=cols < n_cols)
