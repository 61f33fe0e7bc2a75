"""LayerNorm of the residual stream, with the residual add and the cast for the next matrix product
in the same kernel (CUDA + Triton; plain PyTorch ops elsewhere, same math).

In a pre-LayerNorm block under autocast, eager PyTorch runs `x + y` (float32), the LayerNorm (float32
in, float32 out) and a cast of its output to bfloat16 for the next linear layer: three passes over
the activations forward and two LayerNorm kernels backward. `add_layer_norm` does the add, the
normalisation and the cast in one pass, and its backward one pass plus a sum of per-program
weight/bias gradient partials (a fixed partition of the rows: deterministic).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

try:
    import triton
    import triton.language as tl
except ImportError:
    triton = None

BACKWARD_ROWS = 8  # rows per program of the backward kernel (each sums its rows' weight/bias gradients)


def layer_norm_to(x: Tensor, norm: nn.LayerNorm, dtype: torch.dtype) -> Tensor:
    """LayerNorm(x) in `dtype`."""
    if _use_kernels(x):
        return AddLayerNorm.apply(x, None, norm.weight, norm.bias, norm.eps, dtype)
    return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps).to(dtype)


def add_layer_norm(x: Tensor, y: Tensor, norm: nn.LayerNorm, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """(x + y, LayerNorm(x + y) in `dtype`): the updated residual stream and the next layer's input."""
    if _use_kernels(x):
        return AddLayerNorm.apply(x, y, norm.weight, norm.bias, norm.eps, dtype)
    total = x + y
    return total, F.layer_norm(total, norm.normalized_shape, norm.weight, norm.bias, norm.eps).to(dtype)


def _use_kernels(x: Tensor) -> bool:
    return triton is not None and x.is_cuda and x.dtype == torch.float32


class AddLayerNorm(torch.autograd.Function):
    """Forward: (x + y, LayerNorm(x + y) in `dtype`), or LayerNorm(x) alone when y is None. x float32."""

    @staticmethod
    def forward(ctx, x: Tensor, y: Tensor | None, weight: Tensor, bias: Tensor, eps: float, dtype: torch.dtype):
        C = x.shape[-1]
        rows = x.reshape(-1, C).contiguous()
        R = rows.shape[0]
        total = torch.empty_like(rows) if y is not None else rows
        out = torch.empty(rows.shape, dtype=dtype, device=x.device)
        mean = torch.empty(R, dtype=torch.float32, device=x.device)
        rstd = torch.empty_like(mean)
        _forward[(R,)](rows, y.reshape(-1, C).contiguous() if y is not None else rows, total, out, weight, bias,
                       mean, rstd, C, eps, HAS_Y=y is not None, BLOCK_C=triton.next_power_of_2(C))
        ctx.save_for_backward(total, weight, mean, rstd)
        ctx.y_dtype = y.dtype if y is not None else None
        ctx.shape = x.shape
        if y is None:
            return out.view(x.shape)
        return total.view(x.shape), out.view(x.shape)

    @staticmethod
    def backward(ctx, *grads: Tensor):
        total, weight, mean, rstd = ctx.saved_tensors
        has_y = ctx.y_dtype is not None
        grad_total, grad_out = grads if has_y else (None, grads[0])
        R, C = total.shape
        rows_per_program = BACKWARD_ROWS
        programs = triton.cdiv(R, rows_per_program)
        grad_x = torch.empty_like(total)
        partial_w = torch.empty(programs, C, dtype=torch.float32, device=total.device)
        partial_b = torch.empty_like(partial_w)
        grad_out = grad_out.reshape(R, C).contiguous()
        has_grad_total = grad_total is not None
        _backward[(programs,)](total, grad_out, grad_total.reshape(R, C).contiguous() if has_grad_total else grad_out,
                               weight, mean, rstd, grad_x, partial_w, partial_b, R, C, rows_per_program,
                               HAS_GRAD_TOTAL=has_grad_total, BLOCK_C=triton.next_power_of_2(C))
        grad_weight = partial_w.sum(0).to(weight.dtype)
        grad_bias = partial_b.sum(0).to(weight.dtype)
        grad_x = grad_x.view(ctx.shape)
        grad_y = grad_x.to(ctx.y_dtype) if has_y else None
        return grad_x, grad_y, grad_weight, grad_bias, None, None


if triton is not None:
    @triton.jit
    def _forward(x_ptr, y_ptr, total_ptr, out_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, C, eps,
                 HAS_Y: tl.constexpr, BLOCK_C: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK_C)
        valid = cols < C
        total = tl.load(x_ptr + row * C + cols, mask=valid, other=0.0)
        if HAS_Y:
            total += tl.load(y_ptr + row * C + cols, mask=valid, other=0.0).to(tl.float32)
            tl.store(total_ptr + row * C + cols, total, mask=valid)
        mean = tl.sum(total, 0) / C
        centred = tl.where(valid, total - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, 0) / C + eps)
        w = tl.load(w_ptr + cols, mask=valid, other=0.0)
        b = tl.load(b_ptr + cols, mask=valid, other=0.0)
        tl.store(out_ptr + row * C + cols, (centred * rstd * w + b).to(out_ptr.dtype.element_ty), mask=valid)
        tl.store(mean_ptr + row, mean)
        tl.store(rstd_ptr + row, rstd)

    @triton.jit
    def _backward(total_ptr, grad_out_ptr, grad_total_ptr, w_ptr, mean_ptr, rstd_ptr, grad_x_ptr, partial_w_ptr,
                  partial_b_ptr, R, C, rows_per_program, HAS_GRAD_TOTAL: tl.constexpr, BLOCK_C: tl.constexpr):
        """Rows [program * rows_per_program, +rows_per_program): grad_x = LayerNorm's input gradient (plus the
        gradient arriving at x + y directly); this program's sums of the weight and bias gradients."""
        program = tl.program_id(0)
        cols = tl.arange(0, BLOCK_C)
        valid = cols < C
        w = tl.load(w_ptr + cols, mask=valid, other=0.0)
        sum_w = tl.zeros((BLOCK_C,), dtype=tl.float32)
        sum_b = tl.zeros((BLOCK_C,), dtype=tl.float32)
        first = program * rows_per_program
        for row in range(first, tl.minimum(first + rows_per_program, R)):
            offsets = tl.cast(row, tl.int64) * C + cols
            mean = tl.load(mean_ptr + row)
            rstd = tl.load(rstd_ptr + row)
            normed = tl.where(valid, (tl.load(total_ptr + offsets, mask=valid, other=0.0) - mean) * rstd, 0.0)
            dy = tl.load(grad_out_ptr + offsets, mask=valid, other=0.0).to(tl.float32)
            wdy = w * dy
            dx = (wdy - (normed * (tl.sum(normed * wdy, 0) / C) + tl.sum(wdy, 0) / C)) * rstd
            if HAS_GRAD_TOTAL:
                dx += tl.load(grad_total_ptr + offsets, mask=valid, other=0.0)
            tl.store(grad_x_ptr + offsets, dx, mask=valid)
            sum_w += dy * normed
            sum_b += dy
        tl.store(partial_w_ptr + program * C + cols, sum_w, mask=valid)
        tl.store(partial_b_ptr + program * C + cols, sum_b, mask=valid)
