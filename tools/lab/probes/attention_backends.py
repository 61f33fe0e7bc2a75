"""SDPA backends on the training passes' attention shapes (shared-prompt layout), forward + backward.

    python3 tools/lab/probes/attention_backends.py

Completion rows attend to [their group's prompt (left-padded), their completion (causal)] through an
additive bias; the prompt rows are causal over their real tokens. Times each backend that accepts
the call (median of 50 after 10 warm-ups, CUDA events), for rookworld_tiny and GPT-2 124M shapes.
FLASH with lower-right causal and no padding is printed as a bound, not an equivalent.
Then the cost of a backend's first call on a new shape (cuDNN builds an execution plan per shape):
wall time of one synchronised forward + backward, for new shapes and for new tensors of a shape seen.
"""
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right


def bias(B, N, P, starts):
    q = torch.arange(N, device="cuda")[:, None]
    k = torch.arange(P + N, device="cuda")[None, :]
    visible = (k >= starts[:, None, None]) & ((k < P) | (k - P <= q))
    return torch.where(visible, 0.0, float("-inf")).to(torch.bfloat16)[:, None]


def timed(fn, repeats=50, warmup=10):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def run(name, B, H, D, P, N, layers):
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, generator=g, requires_grad=True)
    k = torch.randn(B, H, P + N, D, device="cuda", dtype=torch.bfloat16, generator=g, requires_grad=True)
    v = torch.randn(B, H, P + N, D, device="cuda", dtype=torch.bfloat16, generator=g, requires_grad=True)
    starts = torch.randint(0, P // 2, (B,), device="cuda", generator=g)
    mask = bias(B, N, P, starts)
    grad = torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, generator=g)
    cases = [("efficient + bias", SDPBackend.EFFICIENT_ATTENTION, mask),
             ("cudnn + bias", SDPBackend.CUDNN_ATTENTION, mask),
             ("flash, lower-right causal (no padding: bound)", SDPBackend.FLASH_ATTENTION,
              causal_lower_right(N, P + N)),
             ("efficient, lower-right causal (no padding)", SDPBackend.EFFICIENT_ATTENTION,
              causal_lower_right(N, P + N))]
    print(f"{name}: B={B} H={H} D={D} keys {P}+{N}, x{layers} layers")
    reference = None
    for label, backend, attn_mask in cases:
        def step():
            with sdpa_kernel([backend]):
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
            y.backward(grad)
        try:
            ms = timed(step)
            with sdpa_kernel([backend]):
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
            if reference is None:
                reference = y.detach()
            diff = (y.detach().float() - reference.float()).abs().max().item() if "bias" in label else float("nan")
            print(f"  {label:50s} {ms * 1000:8.1f} us/layer  x{layers} = {ms * layers:6.2f} ms   max diff {diff:.3g}")
        except Exception as error:  # a backend that refuses these inputs: say why
            print(f"  {label:50s} unavailable: {type(error).__name__}: {str(error).splitlines()[0][:120]}")


def first_calls(B, H, D, N):
    print(f"first calls: B={B} H={H} D={D} N={N} (ms, one synchronised forward + backward)")
    for backend in (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION):
        seconds = []
        for P in (64, 80, 96, 64, 80, 96):  # three new shapes, then the same three again (new tensors)
            q = torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            k = torch.randn(B, H, P + N, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            v = torch.randn(B, H, P + N, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            mask = bias(B, N, P, torch.zeros(B, dtype=torch.long, device="cuda"))
            torch.cuda.synchronize()
            start = time.perf_counter()
            with sdpa_kernel([backend]):
                F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()
            torch.cuda.synchronize()
            seconds.append(f"{(time.perf_counter() - start) * 1000:.1f}")
        print(f"  {backend.name:22s} new shapes {' '.join(seconds[:3])}; seen shapes {' '.join(seconds[3:])}")


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name())
    first_calls(64, 8, 48, 112)
    run("rookworld_tiny", 64, 8, 48, 112, 112, 8)
    run("GPT-2 124M", 64, 12, 64, 112, 144, 12)
