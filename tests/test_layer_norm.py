"""The fused residual-add + LayerNorm (rookworld/model/layer_norm.py) against plain PyTorch ops.

The Triton kernels run on CUDA, or on the CPU under TRITON_INTERPRET=1; elsewhere these tests skip
(the model's own tests cover the plain path `add_layer_norm` takes there)."""
import os

import pytest
import torch
import torch.nn.functional as F

from rookworld.model.layer_norm import AddLayerNorm, add_layer_norm, layer_norm_to, triton

if triton is None:
    DEVICE = None
elif torch.cuda.is_available():
    DEVICE = "cuda"
else:
    DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else None
pytestmark = pytest.mark.skipif(DEVICE is None, reason="needs Triton on CUDA, or TRITON_INTERPRET=1")


def inputs(rows: int, width: int):
    generator = torch.Generator().manual_seed(width)
    x, y = (torch.randn(rows, width, generator=generator).to(DEVICE).requires_grad_() for _ in range(2))
    norm = torch.nn.LayerNorm(width).to(DEVICE)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(width, generator=generator))
        norm.bias.copy_(torch.randn(width, generator=generator))
    probe = torch.linspace(-1, 1, width, device=DEVICE)  # a loss that weighs every column differently
    return x, y, norm, probe


def gradients(loss, tensors):
    return torch.autograd.grad(loss, tensors)


@pytest.mark.parametrize("width", [48, 384, 768])
def test_add_layer_norm_equals_add_then_layer_norm_with_gradients(width):
    x, y, norm, probe = inputs(300, width)
    total, out = AddLayerNorm.apply(x, y, norm.weight, norm.bias, norm.eps, torch.float32)
    plain_total = x + y
    plain_out = F.layer_norm(plain_total, (width,), norm.weight, norm.bias, norm.eps)
    torch.testing.assert_close(total, plain_total, rtol=0, atol=0)
    torch.testing.assert_close(out, plain_out, rtol=1e-5, atol=1e-5)
    params = (x, y, norm.weight, norm.bias)
    fused = gradients(0.3 * total.sum() + (out * probe).sum(), params)
    plain = gradients(0.3 * plain_total.sum() + (plain_out * probe).sum(), params)
    for got, expected in zip(fused, plain):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-4)


def test_layer_norm_alone_and_the_cast_to_the_matmul_dtype():
    x, _, norm, probe = inputs(64, 384)
    out = AddLayerNorm.apply(x, None, norm.weight, norm.bias, norm.eps, torch.bfloat16)
    plain = F.layer_norm(x, (384,), norm.weight, norm.bias, norm.eps)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, plain.to(torch.bfloat16), rtol=1.6e-2, atol=1e-2)  # one bf16 step
    probe = probe.to(torch.bfloat16).float()  # the gradient reaching a bf16 output is bf16
    fused = gradients((out.float() * probe).sum(), (x, norm.weight, norm.bias))
    expected = gradients((plain * probe).sum(), (x, norm.weight, norm.bias))
    for got, want in zip(fused, expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)


def test_the_public_functions_take_the_plain_path_off_cuda():
    x, y, norm, _ = inputs(8, 48)
    if DEVICE == "cuda":
        x, y = x.detach().cpu(), y.detach().cpu()
        norm = norm.cpu()
    total, out = add_layer_norm(x, y, norm, torch.float32)
    torch.testing.assert_close(total, x + y)
    torch.testing.assert_close(out, F.layer_norm(x + y, (48,), norm.weight, norm.bias, norm.eps))
    torch.testing.assert_close(layer_norm_to(x, norm, torch.float64), F.layer_norm(x, (48,), norm.weight,
                                                                                    norm.bias, norm.eps).double())
