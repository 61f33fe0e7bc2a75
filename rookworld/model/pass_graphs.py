"""CUDA graphs of the training passes (the update's forward + backward, the no-grad log-prob passes),
one per padded batch shape.

At GRPO batch sizes a GPT-2-sized or smaller model runs a pass in less time than the host needs to
launch its hundreds to thousands of kernels one by one; a CUDA graph launches them all at once (on
an H100 the rookworld_tiny update with activation checkpointing took 0.052 s eagerly, 0.019 s
replayed: docs/lab/performance-versions.md).

A graph fixes shapes and addresses. `pad_rows` pads a batch's prompt width (on the left) and
completion width (on the right) up to a multiple of `bucket`; the extra positions are masked, so no
real token's value changes. (The rows' layout is the trainer's: distinct prompts [U, P] and
completions [B, N], see GPT.completion_hidden.) `ShapeGraphs` keeps one graph per distinct set of
input shapes and static arguments:
  - the first call of all runs `fn` eagerly on a side stream (that is the call's result; the run
    also compiles the Triton kernels and warms cuBLAS), then captures its graph. Capture records
    without running, so nothing is computed twice;
  - a later new shape is captured right away (no eager run: its memory would come on top of the
    pool's), then replayed like every known shape: the inputs are copied into that graph's static
    buffers and the graph runs.
All graphs of a `ShapeGraphs` (and any that share its `pool`) share one memory pool: a pass's
temporaries are dead when it ends, so the pool holds about one pass's activations, not one per shape.
A replay's outputs live in that pool too; `__call__` returns copies, so they stay valid.

Gradients: a backward inside a graph adds into each parameter's `.grad` in place, so every `.grad`
must exist before the first capture (`ensure_grads`) and be zeroed in place afterwards, never set to
None (`zero_grad(set_to_none=False)`).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import Tensor

from rookworld.model.fast_sampling import capturing, side_stream

PROMPT_KEYS = ("prompt_ids", "prompt_mask", "prompt_positions")           # [U, P]: padded on the left
COMPLETION_KEYS = ("completion_ids", "completion_positions", "mask", "ref_logp", "old_logp",
                   "sampler_logp", "trained")  # [B, N]: padded on the right
MODEL_INPUTS = (*PROMPT_KEYS, "group", "completion_ids", "completion_positions", "mask")  # what a forward reads


def pad_rows(rows: dict[str, Tensor], bucket: int) -> dict[str, Tensor]:
    """`rows` with the prompt tensors (PROMPT_KEYS) left-padded and the completion tensors
    (COMPLETION_KEYS) right-padded to widths that are multiples of `bucket`. Padding is masked out
    (prompt mask False, completion mask 0); its other values are zeros. Other tensors pass unchanged."""
    left = -rows["prompt_ids"].shape[1] % bucket
    right = -rows["mask"].shape[1] % bucket
    padded = {}
    for name, tensor in rows.items():
        if name in PROMPT_KEYS:
            padded[name] = F.pad(tensor, (left, 0), value=0)
        elif name in COMPLETION_KEYS:
            padded[name] = F.pad(tensor, (0, right), value=0)
        else:
            padded[name] = tensor
    return padded


def ensure_grads(parameters: Iterable[torch.nn.Parameter]) -> None:
    """Give every trainable parameter a zero `.grad`, so that captured backward passes add into it."""
    for parameter in parameters:
        if parameter.requires_grad and parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)


class ShapeGraphs:
    """`fn(inputs, **static) -> dict of tensors`, replayed from a CUDA graph per input shape.

    `fn` must be graph-safe: no host synchronisation, no host-side branching on tensor values, and
    everything it reads besides `inputs` (weights, buffers) at fixed addresses.
    """

    def __init__(self, fn: Callable[..., dict[str, Tensor]], device: torch.device, pool=None):
        self.fn, self.device = fn, device
        self.pool = pool if pool is not None else torch.cuda.graph_pool_handle()
        self.graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, dict[str, Tensor], dict[str, Tensor]]] = {}
        self.captures = 0  # graphs captured so far (a shape seen again after close() counts again)

    def __call__(self, inputs: dict[str, Tensor], **static) -> dict[str, Tensor]:
        key = (tuple(sorted(static.items())),
               tuple((name, tuple(t.shape), t.dtype) for name, t in sorted(inputs.items())))
        if key not in self.graphs:
            first = self.captures == 0
            outputs = self._eager(inputs, static) if first else None
            self.graphs[key] = self._capture(inputs, static)
            self.captures += 1
            if first:
                return outputs
        graph, static_inputs, static_outputs = self.graphs[key]
        for name, tensor in inputs.items():
            static_inputs[name].copy_(tensor)
        graph.replay()
        return {name: tensor.clone() for name, tensor in static_outputs.items()}

    def _eager(self, inputs: dict[str, Tensor], static: dict) -> dict[str, Tensor]:
        side = side_stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            outputs = self.fn(inputs, **static)
        torch.cuda.current_stream(self.device).wait_stream(side)
        return outputs

    def _capture(self, inputs: dict[str, Tensor], static: dict):
        static_inputs = {name: tensor.clone() for name, tensor in inputs.items()}
        graph = torch.cuda.CUDAGraph()
        with capturing(graph, self.pool, side_stream(self.device)):
            static_outputs = self.fn(static_inputs, **static)
        return graph, static_inputs, static_outputs

    def close(self) -> None:
        self.graphs.clear()
