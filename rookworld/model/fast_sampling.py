"""Fast batched sampling: static KV caches and the one-token decode step captured in a CUDA graph.

`StaticDecoder(model).generate(...)` has the contract of `sampling.generate` (same arguments bar the
model, same `Generation`) and its algorithm, token for token: a prefill of the left-padded prompts,
then per step: sample from the current logits, record the token (pad once a row is finished), run
the model on it. How the work reaches the GPU differs:

- Buffers owned by the decoder and reused across calls: a prompt KV cache per distinct prompt
  [n_layer, 2, U, H, P, D] (the G completions of a GRPO group share one; the prefill runs once per
  distinct prompt), a completion KV cache per row [n_layer, 2, B, H, N, D], logits, per-row state and
  the outputs [B, N]. Prompts are left-padded to the buffers' width (a multiple of 32), so the
  prefill has one shape too. The step number and positions live on the device, so one captured
  graph serves the prefill and one every step of every call with the same buffers and sampling
  settings.
  Buffers grow (and the graph is re-captured) only when a call needs more rows, prompt width or
  new tokens than any before; the graph memory pool is private to the decoder.
- The residual stream is float32 and matrix products run in the compute dtype (bfloat16 on CUDA:
  copies of the linear weights refreshed at each call), the numerics of the trainer's autocast.
  The output projection uses a copy of the embedding padded to a multiple of 64 rows, which keeps
  cuBLAS on its fast kernels (50257 rows is not 16-byte aligned).
- On CUDA with Triton, kernels of rookworld.model.decode_kernels run the whole step but the output
  projection: split-K products for few rows whose partial sums the next kernel adds, embedding and
  residual-add + LayerNorm, attention (+ KV write) and sampling + bookkeeping.
  Elsewhere the same step runs as plain PyTorch ops (the CPU path of the tests; on CUDA it is what
  the graph captures when Triton is missing).
- Sampling draws exactly like torch.multinomial draws one sample: argmax(probs / E) with
  E ~ Exponential(1) from the given generator, inside the graph (the generator is registered with
  it). Same generator state, same logits: same tokens as `sampling.generate`.
- The host checks whether every row has finished only every `check_every` steps; the extra steps
  emit padding only and are trimmed from the result. The rows a check finds finished can be handed
  to the caller (`on_finished`) while the GPU runs the next steps: the trainer scores them then.

`make_decoder(model)` returns a StaticDecoder on CUDA and elsewhere a PlainDecoder
(rookworld.model.sampling: `generate` behind the same interface), so a decoder is never None.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import sdpa_kernel

from rookworld.model import decode_kernels as kernels
from rookworld.model.fused_logprobs import VOCAB_ALIGN
from rookworld.model.gpt2 import ATTENTION_BACKENDS, GPT, attention_bias, attention_mask_4d
from rookworld.model.sampling import Generation, PlainDecoder, check_request, left_pad, sample_next

MAX_STOPS = 8
FinishedHook = Callable[[list[int], list[list[int]]], None]  # (rows, their completions' token ids)
_side_streams: dict[torch.device, torch.cuda.Stream] = {}  # one per device: cuBLAS keeps a workspace per stream


@dataclass(frozen=True)
class SamplingSpec:
    """The sampling settings a captured step bakes in."""
    greedy: bool
    temperature: float
    top_k: int | None
    top_p: float | None
    pad_id: int
    n_stops: int

    @property
    def fused(self) -> bool:
        """Sampling the fused kernel does (top-k / top-p take the PyTorch path)."""
        return self.greedy or (not self.top_k and (self.top_p is None or self.top_p >= 1.0))


@dataclass
class DecodeBuffers:
    """Everything a decode step reads or writes, for one batch size and capacity."""
    prefill_ids: Tensor    # [U, P_cap] long: the distinct prompts, left-padded to P_cap (unused rows: padding)
    prefill_mask: Tensor   # [U, P_cap] bool: real prompt tokens
    prompt_kv: Tensor      # [n_layer, 2, U, H, P_cap, D] keys, values of each distinct prompt
    row_start: Tensor      # [B] long: column of the first real token of each row's prompt (left padding before)
    completion_kv: Tensor  # [n_layer, 2, B, H, N_cap, D] keys, values of each row's completion
    leader: Tensor         # [B] long: the prompt (row of prompt_kv) of each row
    logits: Tensor         # [B, V_pad] next-token logits (compute dtype)
    noise: Tensor          # [B, V] float32 Exponential(1) draws
    x: Tensor              # [B, C] float32 residual stream
    h: Tensor              # [B, C] LayerNorm output (compute dtype)
    y: Tensor              # [B, C] attention output (compute dtype)
    hidden: Tensor         # [B, 4C] MLP inner activations (compute dtype; kernels path)
    qkv_partials: Tensor   # [S, B, 3C] float32 split-K partial sums of c_attn (kernels path)
    proj_partials: Tensor  # [S, B, C] float32 split-K partial sums of the c_proj products (kernels path)
    emitted: Tensor        # [B] long: token fed to the model this step (pad once finished)
    position: Tensor       # [B] long: position id of each row's next token
    fed_position: Tensor   # [B] long: position id of `emitted`
    step: Tensor           # [1] long: index of the token being sampled
    caps: Tensor           # [B] long: per-row max_new_tokens
    finished: Tensor       # [B] bool
    stops: Tensor          # [MAX_STOPS] long (the first n_stops are used)
    out_tokens: Tensor     # [B, N_cap] long
    out_logprobs: Tensor   # [B, N_cap] float32
    out_active: Tensor     # [B, N_cap] bool

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(rows, distinct prompts, prompt width, new tokens) this set of buffers holds."""
        return (self.completion_kv.shape[2], self.prompt_kv.shape[2], self.prompt_kv.shape[4],
                self.completion_kv.shape[4])


class DecodeWeights:
    """The model's parameters as the decode step reads them: embeddings and LayerNorms from the model
    itself (float32, like autocast), linear layers and the padded output projection in the compute
    dtype (copies refreshed in place by `refresh()`, so a captured graph sees every update)."""

    def __init__(self, model: GPT, dtype: torch.dtype):
        self.model, self.dtype = model, dtype
        self._bind()

    def _bind(self) -> None:
        named = dict(self.model.named_parameters())
        self.sources = list(named.values())
        self.pointers = [p.data_ptr() for p in self.sources]
        copied = [name for name, p in named.items() if is_matmul(name) and p.dtype != self.dtype]
        self.tensors = {name: p.detach().to(self.dtype, copy=True) if name in copied else p.detach()
                        for name, p in named.items()}
        wte = named["wte.weight"].detach()
        padded = -(-wte.shape[0] // VOCAB_ALIGN) * VOCAB_ALIGN
        if padded == wte.shape[0] and wte.dtype == self.dtype:
            self.unembed = wte
        else:
            self.unembed = torch.zeros(padded, wte.shape[1], dtype=self.dtype, device=wte.device)
        self.copies = [(self.tensors[name], named[name].detach()) for name in copied] \
            + ([(self.unembed[:wte.shape[0]], wte)] if self.unembed is not wte else [])

    def refresh(self) -> bool:
        """Bring the copies up to date; True if the model's storage moved (captured graphs are stale)."""
        if [p.data_ptr() for p in self.sources] != self.pointers:
            self._bind()
            return True
        if self.copies:
            destinations, sources = zip(*self.copies)
            torch._foreach_copy_(list(destinations), list(sources))
        return False

    def __getitem__(self, name: str) -> Tensor:
        return self.tensors[name]


def is_matmul(name: str) -> bool:
    return ".attn.c_" in name or ".mlp.c_" in name


class StaticDecoder:
    """Batched sampling with preallocated buffers; on CUDA the decode step runs as a CUDA graph."""

    def __init__(self, model: GPT, *, dtype: torch.dtype | None = None, use_graphs: bool | None = None,
                 use_kernels: bool | None = None, check_every: int = 16, ignore_stops: bool = False):
        self.model = model
        self.device = model.wte.weight.device
        is_cuda = self.device.type == "cuda"
        self.dtype = dtype or (torch.bfloat16 if is_cuda else torch.float32)
        self.use_graphs = is_cuda if use_graphs is None else use_graphs
        if self.use_graphs and not is_cuda:
            raise ValueError("CUDA graphs need a model on a CUDA device")
        self.use_kernels = kernels.kernels_available(self.device) if use_kernels is None else use_kernels
        self.check_every = check_every
        self.splits = kernel_splits(model.config) if self.use_kernels else {"qkv": 1, "proj": 1, "mlp_proj": 1}
        self.ignore_stops = ignore_stops  # benchmarks: every row runs to its cap
        self.weights = DecodeWeights(model, self.dtype)
        self.buffers: DecodeBuffers | None = None
        self.graphs: dict[SamplingSpec, torch.cuda.CUDAGraph] = {}
        self.prefill_graph: torch.cuda.CUDAGraph | None = None
        self.graph_generator: torch.Generator | None = None
        self.pool = None
        self.captures = 0  # graphs captured so far (re-captures show up here)

    # ------------------------------------------------------------------ public
    @torch.no_grad()
    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], *,
                 temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                 stop_ids: Iterable[int] = (), pad_id: int, generator: torch.Generator | None = None,
                 greedy: bool = False, on_finished: FinishedHook | None = None) -> Generation:
        """Same contract as `sampling.generate(model, ...)`. `on_finished(rows, completions)`, if given,
        is called during generation with rows whose completions (token ids, stop token included) are
        final, while the GPU generates the others; rows still running at the last check are not
        reported (the caller reads them from the result)."""
        check_request(self.model, prompts, max_new_tokens)
        greedy = greedy or temperature == 0
        stops = [] if self.ignore_stops else sorted(set(stop_ids))
        if len(stops) > MAX_STOPS:
            raise ValueError(f"at most {MAX_STOPS} stop ids are supported, got {len(stops)}")
        spec = SamplingSpec(greedy, 1.0 if greedy else float(temperature), None if greedy else top_k,
                            None if greedy else top_p, int(pad_id), len(stops))
        prompt_ids, prompt_mask = left_pad(prompts, pad_id, self.device)
        n_max = max(int(n) for n in max_new_tokens)
        if n_max <= 0:
            return empty_generation(prompt_ids, prompt_mask)
        distinct, leader = distinct_prompts(prompts)
        with torch.autocast(self.device.type, enabled=False), sdpa_kernel(ATTENTION_BACKENDS):
            if self.weights.refresh():
                self.release_graphs()
            self._ensure_buffers(len(prompts), len(distinct), prompt_ids.shape[1], n_max)
            if self.use_graphs:
                self._capture(spec, generator)
                self._capture_prefill()
            self._prefill([prompts[row] for row in distinct], leader, max_new_tokens, stops, int(pad_id))
            steps = self._decode(n_max, spec, generator, on_finished)
        return self._collect(prompt_ids, prompt_mask, steps)

    def release_graphs(self) -> None:
        """Drop every captured graph (and with them their memory pool)."""
        graphs = [*self.graphs.values(), *([self.prefill_graph] if self.prefill_graph else [])]
        if graphs and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        for graph in graphs:
            graph.reset()
        self.graphs.clear()
        self.prefill_graph = None
        self.pool = None

    def close(self) -> None:
        """Free graphs and buffers now rather than at garbage collection."""
        self.release_graphs()
        self.buffers = None

    # ------------------------------------------------------------------ buffers and graphs
    def _ensure_buffers(self, rows: int, distinct: int, width: int, new_tokens: int) -> None:
        current = self.buffers
        if current is not None:
            have = current.shape
            if have[0] == rows and all(h >= n for h, n in zip(have[1:], (distinct, width, new_tokens))):
                return
            if have[0] == rows:  # grow, never shrink: a later, smaller call reuses these
                distinct, width, new_tokens = max(distinct, have[1]), max(width, have[2]), max(new_tokens, have[3])
        self.release_graphs()
        self.buffers = None  # free the old buffers before allocating new ones
        self.buffers = self._allocate(rows, distinct, round_up(width, 32), round_up(new_tokens, 16))

    def _allocate(self, rows: int, distinct: int, width: int, new_tokens: int) -> DecodeBuffers:
        config, device, dtype = self.model.config, self.device, self.dtype
        C, H, D = config.n_embd, config.n_head, config.head_dim
        longs = dict(dtype=torch.long, device=device)
        floats = dict(dtype=torch.float32, device=device)
        computes = dict(dtype=dtype, device=device)
        proj_splits = max(self.splits["proj"], self.splits["mlp_proj"])
        return DecodeBuffers(
            prefill_ids=torch.zeros(distinct, width, **longs),
            prefill_mask=torch.zeros(distinct, width, dtype=torch.bool, device=device),
            prompt_kv=torch.zeros(config.n_layer, 2, distinct, H, width, D, **computes),
            row_start=torch.zeros(rows, **longs),
            completion_kv=torch.zeros(config.n_layer, 2, rows, H, new_tokens, D, **computes),
            leader=torch.zeros(rows, **longs),
            logits=torch.zeros(rows, self.weights.unembed.shape[0], dtype=dtype, device=device),
            noise=torch.ones(rows, config.vocab_size, **floats),
            x=torch.zeros(rows, C, **floats), h=torch.zeros(rows, C, **computes), y=torch.zeros(rows, C, **computes),
            hidden=torch.zeros(rows, 4 * C, **computes),
            qkv_partials=torch.zeros(self.splits["qkv"], rows, 3 * C, **floats),
            proj_partials=torch.zeros(proj_splits, rows, C, **floats),
            emitted=torch.zeros(rows, **longs), position=torch.zeros(rows, **longs),
            fed_position=torch.zeros(rows, **longs), step=torch.zeros(1, **longs), caps=torch.zeros(rows, **longs),
            finished=torch.zeros(rows, dtype=torch.bool, device=device), stops=torch.zeros(MAX_STOPS, **longs),
            out_tokens=torch.zeros(rows, new_tokens, **longs), out_logprobs=torch.zeros(rows, new_tokens, **floats),
            out_active=torch.zeros(rows, new_tokens, dtype=torch.bool, device=device),
        )

    def _capture(self, spec: SamplingSpec, generator: torch.Generator | None) -> None:
        if generator is not self.graph_generator:
            self.release_graphs()  # a graph advances the generator it was captured with
            self.graph_generator = generator
        if spec in self.graphs:
            return
        rng_state = generator.get_state() if generator is not None else None
        self.graphs[spec] = self._graph_of(lambda: self._step(spec, generator), generator)
        if rng_state is not None:
            generator.set_state(rng_state)

    def _capture_prefill(self) -> None:
        if self.prefill_graph is None:
            self.prefill_graph = self._graph_of(self._prefill_forward, None)

    def _graph_of(self, work, generator: torch.Generator | None) -> torch.cuda.CUDAGraph:
        """`work` captured in a CUDA graph (after one warm-up run, so lazy initialisation stays out)."""
        self._reset_state()
        side = side_stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            work()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self._reset_state()
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        if generator is not None:
            graph.register_generator_state(generator)
        with capturing(graph, self.pool, side):
            work()
        self.captures += 1
        return graph

    def _reset_state(self) -> None:
        """Harmless values for a warm-up run: in-range indices, nothing finished, no prompt."""
        b = self.buffers
        for tensor in (b.step, b.leader, b.position, b.fed_position, b.emitted, b.row_start):
            tensor.zero_()
        b.caps.fill_(b.shape[3])
        b.finished.fill_(False)
        b.prefill_mask.fill_(False)

    # ------------------------------------------------------------------ the algorithm
    def _prefill(self, prompts: list[Sequence[int]], leader: list[int], max_new_tokens: Sequence[int],
                 stops: list[int], pad_id: int) -> None:
        """Load the distinct prompts and the per-row state into the buffers, then run the prefill."""
        b = self.buffers
        U_cap, P_cap = b.prefill_ids.shape
        unused = [[]] * (U_cap - len(prompts))  # rows of padding only
        ids, mask = left_pad(list(prompts) + unused, pad_id, torch.device("cpu"), width=P_cap)
        b.prefill_ids.copy_(ids)
        b.prefill_mask.copy_(mask)
        b.leader.copy_(torch.tensor(leader, dtype=torch.long))
        b.caps.copy_(torch.tensor(list(max_new_tokens), dtype=torch.long))
        b.finished.copy_(b.caps <= 0)
        b.step.zero_()
        if stops:
            b.stops[:len(stops)] = torch.tensor(stops, dtype=torch.long)
        if self.use_graphs:
            self.prefill_graph.replay()
        else:
            self._prefill_forward()

    def _prefill_forward(self) -> None:
        """The prompts through the model (graph-safe): their KV caches, each row's first logits,
        where its prompt starts in the cache and the position of its first new token."""
        b = self.buffers
        U, P = b.prefill_ids.shape
        real = b.prefill_mask
        positions = (real.long().cumsum(-1) - 1).clamp(min=0)
        mask = attention_bias(attention_mask_4d(real, 0, P, self.device), self.dtype)
        x = F.embedding(b.prefill_ids, self.weights["wte.weight"]) + F.embedding(positions, self.weights["wpe.weight"])
        for layer in range(self.model.config.n_layer):
            x = self._prefill_layer(layer, x, mask, U, P)
        hidden = self._layer_norm(x[:, -1], "ln_f")
        lengths = real.sum(-1).index_select(0, b.leader)
        b.logits.copy_(F.linear(hidden, self.weights.unembed).index_select(0, b.leader))
        b.row_start.copy_(P - lengths)
        b.position.copy_(lengths)

    def _prefill_layer(self, layer: int, x: Tensor, mask: Tensor, U: int, P: int) -> Tensor:
        C, H = self.model.config.n_embd, self.model.config.n_head
        p = f"h.{layer}."
        qkv = self._linear(self._layer_norm(x, p + "ln_1"), p + "attn.c_attn")
        q, k, v = (t.view(U, P, H, C // H).transpose(1, 2) for t in qkv.split(C, dim=2))
        self.buffers.prompt_kv[layer, 0, :U, :, :P] = k
        self.buffers.prompt_kv[layer, 1, :U, :, :P] = v
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(U, P, C)
        return self._mlp(layer, x + self._linear(y, p + "attn.c_proj"))

    def _decode(self, n_max: int, spec: SamplingSpec, generator: torch.Generator | None,
                on_finished: FinishedHook | None) -> int:
        """Run the steps; return how many ran. With stop ids the host checks every `check_every` steps
        whether every row has finished (each check is a host sync: the GPU idles until the next steps
        are queued). The completions of the rows found finished are read and handed to `on_finished`
        only once the next steps are queued, so that this host work overlaps them."""
        checks = spec.n_stops > 0  # without stop ids every row runs to its cap: nothing to check
        reported = torch.zeros(self.buffers.shape[0], dtype=torch.bool)
        done, newly_finished = 0, None
        while done < n_max:
            for _ in range(min(self.check_every, n_max - done) if checks else n_max):
                if self.use_graphs:
                    self.graphs[spec].replay()
                else:
                    self._step(spec, generator, eager_step=done)
                done += 1
            if newly_finished:
                on_finished(*self._completions(*newly_finished))
                newly_finished = None
            if not checks or done == n_max:
                break
            finished = self.buffers.finished.cpu()
            if bool(finished.all()):
                break
            if on_finished is not None and bool((finished & ~reported).any()):
                newly_finished = finished & ~reported, done
                reported |= finished
        return done

    def _completions(self, rows: Tensor, steps: int) -> tuple[list[int], list[list[int]]]:
        """Indices of `rows` (a host bool mask) and their completions in the first `steps` steps, which
        have run: read on the side stream, so the copies need not wait for the steps queued since."""
        with torch.cuda.stream(side_stream(self.device)) if self.use_graphs else contextlib.nullcontext():
            tokens, active = self.buffers.out_tokens[:, :steps].cpu(), self.buffers.out_active[:, :steps].cpu()
        index = rows.nonzero().flatten().tolist()
        return index, [tokens[row][active[row]].tolist() for row in index]

    def _step(self, spec: SamplingSpec, generator: torch.Generator | None,
              eager_step: int | None = None) -> None:
        """Sample a token per row, record it, run the model on it. Graph-safe (no host reads) unless
        `eager_step` (the step number) is given: then attention covers exactly the keys so far (eager)."""
        b = self.buffers
        if self.use_kernels and spec.fused:
            if not spec.greedy:
                b.noise.exponential_(1, generator=generator)
            kernels.sample_and_record(
                b.logits, b.noise if not spec.greedy else b.logits, spec.temperature, spec.greedy, b.finished, b.caps,
                b.stops, spec.n_stops, b.step, spec.pad_id, b.out_tokens, b.out_logprobs, b.out_active, b.emitted,
                b.position, b.fed_position, self.model.config.vocab_size)
        else:
            logits = b.logits[:, :self.model.config.vocab_size].float()
            self._record(*sample_next(logits, spec.temperature, spec.top_k, spec.top_p, spec.greedy, generator), spec)
        if self.use_kernels:
            self._forward_kernels()
        else:
            self._forward_torch(eager_step)
        b.step += 1

    def _record(self, token: Tensor, logprob: Tensor, spec: SamplingSpec) -> None:
        b = self.buffers
        active = ~b.finished
        emitted = torch.where(active, token, spec.pad_id)
        b.out_tokens.index_copy_(1, b.step, emitted[:, None])
        b.out_logprobs.index_copy_(1, b.step, torch.where(active, logprob, 0.0)[:, None])
        b.out_active.index_copy_(1, b.step, active[:, None])
        done = b.step + 1 >= b.caps
        if spec.n_stops:
            done = done | (token[:, None] == b.stops[None, :spec.n_stops]).any(1)
        b.finished |= done
        b.emitted.copy_(emitted)
        b.fed_position.copy_(b.position)
        b.position += active

    def _forward_kernels(self) -> None:
        """The model on `emitted` at `fed_position`, fused kernels around cuBLAS matrix products."""
        b, w, config = self.buffers, self.weights, self.model.config
        eps = config.layer_norm_epsilon
        kernels.embed_layernorm(b.x, w["wte.weight"], w["wpe.weight"], b.emitted, b.fed_position,
                                w["h.0.ln_1.weight"], w["h.0.ln_1.bias"], b.h, eps)
        attn_proj, mlp_proj = b.proj_partials[:self.splits["proj"]], b.proj_partials[:self.splits["mlp_proj"]]
        for layer in range(config.n_layer):
            p = f"h.{layer}."
            kernels.linear_partials(b.h, w[p + "attn.c_attn.weight"], b.qkv_partials)
            kernels.decode_attention(b.qkv_partials, w[p + "attn.c_attn.bias"], b.prompt_kv[layer], b.row_start,
                                     b.leader, b.completion_kv[layer], b.step, b.y)
            kernels.linear_partials(b.y, w[p + "attn.c_proj.weight"], attn_proj)
            kernels.add_layernorm(b.x, attn_proj, w[p + "attn.c_proj.bias"], w[p + "ln_2.weight"],
                                  w[p + "ln_2.bias"], b.h, eps)
            kernels.linear_gelu(b.h, w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"], b.hidden)
            kernels.linear_partials(b.hidden, w[p + "mlp.c_proj.weight"], mlp_proj)
            after = f"h.{layer + 1}.ln_1" if layer + 1 < config.n_layer else "ln_f"
            kernels.add_layernorm(b.x, mlp_proj, w[p + "mlp.c_proj.bias"], w[after + ".weight"],
                                  w[after + ".bias"], b.h, eps)
        torch.mm(b.h, w.unembed.t(), out=b.logits)

    def _forward_torch(self, eager_step: int | None) -> None:
        """The same forward in plain PyTorch ops (CPU, and CUDA without Triton)."""
        b, w, config = self.buffers, self.weights, self.model.config
        x = F.embedding(b.emitted, w["wte.weight"]) + F.embedding(b.fed_position, w["wpe.weight"])
        for layer in range(config.n_layer):
            p = f"h.{layer}."
            qkv = self._linear(self._layer_norm(x, p + "ln_1"), p + "attn.c_attn")
            x = self._mlp(layer, x + self._linear(self._attend_torch(qkv, layer, eager_step), p + "attn.c_proj"))
        b.logits.copy_(F.linear(self._layer_norm(x, "ln_f"), w.unembed))

    def _attend_torch(self, qkv: Tensor, layer: int, eager_step: int | None) -> Tensor:
        """Attention of the new tokens over [prompt, completion so far, themselves] with SDPA."""
        b, config = self.buffers, self.model.config
        B, C, H, D = qkv.shape[0], config.n_embd, config.n_head, config.head_dim
        q, k_new, v_new = (t.view(B, H, 1, D) for t in qkv.split(C, dim=1))
        completion = b.completion_kv[layer]  # [2, B, H, N_cap, D]
        completion.index_copy_(3, b.step, torch.stack([k_new, v_new]))
        if eager_step is None:  # graph: the whole buffer, masked by the step on the device
            length = completion.shape[3]
            seen = torch.arange(length, device=qkv.device) <= b.step
        else:
            length = eager_step + 1
            seen = torch.ones(length, dtype=torch.bool, device=qkv.device)
        real = torch.arange(b.prompt_kv.shape[4], device=qkv.device) >= b.row_start[:, None]
        visible = torch.cat([real, seen.expand(B, length)], dim=1)
        prompt = b.prompt_kv[layer].index_select(1, b.leader)
        keys, values = torch.cat([prompt, completion[..., :length, :]], dim=3)
        y = F.scaled_dot_product_attention(q, keys, values, attn_mask=visible[:, None, None, :])
        return y.reshape(B, C)

    def _mlp(self, layer: int, x: Tensor) -> Tensor:
        p = f"h.{layer}.mlp."
        hidden = F.gelu(self._linear(self._layer_norm(x, f"h.{layer}.ln_2"), p + "c_fc"), approximate="tanh")
        return x + self._linear(hidden, p + "c_proj")

    def _layer_norm(self, x: Tensor, name: str) -> Tensor:
        """float32 LayerNorm, output in the compute dtype (what autocast feeds the next matmul)."""
        w = self.weights
        return F.layer_norm(x, (x.shape[-1],), w[name + ".weight"], w[name + ".bias"],
                            self.model.config.layer_norm_epsilon).to(self.dtype)

    def _linear(self, x: Tensor, name: str) -> Tensor:
        return F.linear(x, self.weights[name + ".weight"], self.weights[name + ".bias"])

    def _collect(self, prompt_ids: Tensor, prompt_mask: Tensor, steps: int) -> Generation:
        """Copy the results out of the buffers (the next call overwrites them), trimmed to the longest
        completion: the width `sampling.generate` returns."""
        b = self.buffers
        active = b.out_active[:, :steps]
        width = int(active.sum(1).max())
        completion_mask = active[:, :width].clone()
        completion_ids = b.out_tokens[:, :width].clone()
        return Generation.assemble(prompt_ids, prompt_mask, completion_ids, completion_mask,
                                   b.out_logprobs[:, :width].clone())


def kernel_splits(config) -> dict[str, int]:
    """K-splits of the three split-K decode products (decode_kernels.linear_partials)."""
    C = config.n_embd
    return {"qkv": kernels.split_count(3 * C, C), "proj": kernels.split_count(C, C),
            "mlp_proj": kernels.split_count(C, 4 * C)}


def make_decoder(model: GPT, *, check_every: int, ignore_stops: bool = False) -> StaticDecoder | PlainDecoder:
    """The fast path on CUDA (checking every `check_every` steps whether all rows stopped); the plain
    sampler behind the same interface elsewhere."""
    if model.wte.weight.device.type == "cuda":
        return StaticDecoder(model, ignore_stops=ignore_stops, check_every=check_every)
    return PlainDecoder(model, ignore_stops=ignore_stops)


def distinct_prompts(prompts: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """Rows of the first occurrence of each distinct prompt, and each row's index among them."""
    first: dict[tuple[int, ...], int] = {}
    rows, leader = [], []
    for row, prompt in enumerate(prompts):
        key = tuple(prompt)
        if key not in first:
            first[key] = len(rows)
            rows.append(row)
        leader.append(first[key])
    return rows, leader


@contextlib.contextmanager
def capturing(graph: torch.cuda.CUDAGraph, pool, stream: torch.cuda.Stream):
    """torch.cuda.graph with Python's garbage collector paused until the capture ends. A collection
    during a capture can destroy an earlier trainer's CUDA graphs (a sweep worker runs trial after
    trial in one process), and destroying a graph is not allowed while a stream captures: the capture
    fails ("operation not permitted when stream is capturing"). torch.cuda.graph collects once before
    it starts, so the old graphs go then."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        with torch.cuda.graph(graph, pool=pool, stream=stream):
            yield
    finally:
        if enabled:
            gc.enable()


def side_stream(device: torch.device) -> torch.cuda.Stream:
    if device not in _side_streams:
        _side_streams[device] = torch.cuda.Stream(device)
    return _side_streams[device]


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def empty_generation(prompt_ids: Tensor, prompt_mask: Tensor) -> Generation:
    B = prompt_ids.shape[0]
    return Generation(input_ids=prompt_ids, attention_mask=prompt_mask,
                      position_ids=(prompt_mask.long().cumsum(-1) - 1).clamp(min=0),
                      prompt_length=prompt_ids.shape[1], completion_ids=prompt_ids.new_zeros((B, 0)),
                      completion_mask=prompt_mask.new_zeros((B, 0)),
                      logprobs=torch.zeros((B, 0), device=prompt_ids.device))
