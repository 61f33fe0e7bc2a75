"""Fast batched sampling: a static KV cache and the one-token decode step captured in CUDA graphs.

`StaticDecoder(model).generate(...)` has the contract of `sampling.generate` (same arguments bar the
model, same `Generation`) and the same algorithm, token for token: one prefill over the left-padded
prompts, then one step per token that samples from the current logits, records the token (pad once a
row is finished), and runs the model on it. What differs is how the work reaches the GPU:

- Every tensor a step touches is preallocated and owned by the decoder: the KV cache
  [n_layer, B, L, 2C] (keys and values of a token side by side, viewed as [B, H, L, D] without a
  copy), the additive attention mask [B, L], the logits, the per-row state (token, position, cap,
  finished) and the outputs [B, N]. The step reads the write position and the step number from
  device tensors, so the same captured graph serves every step.
- On CUDA the step is captured once per (batch shape, attention span, sampling settings) and
  replayed; graphs live in one private memory pool and are reused across calls. Attention reads the
  cache only up to `span`, the written length rounded up to `span_block`, so early steps read less.
- Sampling runs inside the graph: temperature, top-k, top-p, and the draw itself as
  argmax(probs / Exponential(1)) with the given generator, which is exactly how `torch.multinomial`
  draws one sample (without its host-side validity check). With the same generator state the
  decoder draws the same tokens as `sampling.generate` wherever the logits agree.
- The host checks whether every row has finished only every `check_every` steps, so a batch may run
  a few steps past its end; those steps emit only padding and are trimmed from the result.
- Compute dtype: bfloat16 on CUDA (a bf16 copy of the weights, refreshed at each call, and a bf16
  residual stream), float32 elsewhere (the model's own parameters, no copy). Autocast is switched
  off inside: the decoder's numerics do not depend on the caller's context.

On the CPU the same step runs eagerly (no graphs): that is what the tests compare against the plain
sampler. `make_decoder(model)` returns a StaticDecoder on CUDA and None elsewhere, where the plain
sampler stays the simple path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from rookworld.model.gpt2 import GPT, attention_mask_4d
from rookworld.model.sampling import Generation, generate, keep_top_k, keep_top_p, left_pad

MAX_STOPS = 8


@dataclass(frozen=True)
class SamplingSpec:
    """The sampling settings a captured step bakes in."""
    greedy: bool
    temperature: float
    top_k: int | None
    top_p: float | None
    pad_id: int
    n_stops: int


@dataclass
class DecodeBuffers:
    """Everything a decode step reads or writes, for one batch size and cache capacity."""
    kv: Tensor            # [n_layer, B, L, 2C] keys | values of every cached token
    mask: Tensor          # [B, L] additive attention mask (0 = visible, -inf = not)
    logits: Tensor        # [B, V] logits of the next token
    position: Tensor      # [B] long, position id of each row's next token
    write_index: Tensor   # [1] long, cache column the next token is written to (= P + step)
    step: Tensor          # [1] long, the step number
    caps: Tensor          # [B] long, per-row max_new_tokens
    finished: Tensor      # [B] bool
    stops: Tensor         # [MAX_STOPS] long, stop token ids (the first n_stops are used)
    out_tokens: Tensor    # [B, N] long
    out_logprobs: Tensor  # [B, N] float32
    out_active: Tensor    # [B, N] bool

    @property
    def batch(self) -> int:
        return self.kv.shape[1]

    @property
    def capacity(self) -> int:
        return self.kv.shape[2]

    @property
    def max_new(self) -> int:
        return self.out_tokens.shape[1]


class DecodeWeights:
    """The model's parameters in the compute dtype: the parameters themselves when the dtype matches,
    else copies refreshed (in place, so captured graphs see them) at every `refresh()`."""

    def __init__(self, model: GPT, dtype: torch.dtype):
        self.model, self.dtype = model, dtype
        self._bind()

    def _bind(self) -> None:
        named = dict(self.model.named_parameters())
        self.sources = list(named.values())
        self.pointers = [p.data_ptr() for p in self.sources]
        self.copied = any(p.dtype != self.dtype for p in self.sources)
        tensors = [p.detach().to(self.dtype, copy=True) if self.copied else p.detach() for p in self.sources]
        self.tensors = dict(zip(named, tensors))

    def refresh(self) -> bool:
        """Bring the weights up to date; True if their storage moved (captured graphs are stale)."""
        if [p.data_ptr() for p in self.sources] != self.pointers:
            self._bind()
            return True
        if self.copied:
            torch._foreach_copy_(list(self.tensors.values()), [p.detach() for p in self.sources])
        return False

    def __getitem__(self, name: str) -> Tensor:
        return self.tensors[name]


class StaticDecoder:
    """Batched sampling with preallocated buffers; on CUDA the decode step runs as a CUDA graph."""

    def __init__(self, model: GPT, *, dtype: torch.dtype | None = None, use_graphs: bool | None = None,
                 check_every: int = 16, span_block: int = 32, ignore_stops: bool = False):
        self.model = model
        self.device = model.wte.weight.device
        is_cuda = self.device.type == "cuda"
        self.dtype = dtype or (torch.bfloat16 if is_cuda else torch.float32)
        self.use_graphs = is_cuda if use_graphs is None else use_graphs
        if self.use_graphs and not is_cuda:
            raise ValueError("CUDA graphs need a model on a CUDA device")
        self.check_every = check_every
        self.span_block = span_block
        self.ignore_stops = ignore_stops  # benchmarks: every row runs to its cap
        self.weights = DecodeWeights(model, self.dtype)
        self.buffers: DecodeBuffers | None = None
        self.graphs: dict[tuple[int, SamplingSpec], torch.cuda.CUDAGraph] = {}
        self.graph_generator: torch.Generator | None = None
        self.pool = None
        self.captures = 0  # graphs captured so far (a re-capture per step would show here)

    # ------------------------------------------------------------------ public
    @torch.no_grad()
    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], *,
                 temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                 stop_ids: Iterable[int] = (), pad_id: int, generator: torch.Generator | None = None,
                 greedy: bool = False) -> Generation:
        """Same contract as `sampling.generate(model, ...)`."""
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
        P = prompt_ids.shape[1]
        with torch.autocast(self.device.type, enabled=False):
            if self.weights.refresh():
                self.release_graphs()
            self._ensure_buffers(len(prompts), P + n_max, n_max)
            spans = [self._span(P + step + 1) for step in range(n_max)]
            if self.use_graphs:
                self._capture(sorted(set(spans)), spec, generator)
            self._prefill(prompt_ids, prompt_mask, max_new_tokens, stops)
            steps = self._decode(spans, spec, generator)
        return self._collect(prompt_ids, prompt_mask, steps)

    def release_graphs(self) -> None:
        """Drop every captured graph (their memory pool goes with them)."""
        if self.graphs and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        for graph in self.graphs.values():
            graph.reset()
        self.graphs.clear()
        self.pool = None

    def close(self) -> None:
        """Free graphs and buffers now rather than at garbage collection."""
        self.release_graphs()
        self.buffers = None

    # ------------------------------------------------------------------ buffers and graphs
    def _span(self, length: int) -> int:
        block = self.span_block
        return min((length + block - 1) // block * block, self.buffers.capacity)

    def _ensure_buffers(self, batch: int, length: int, max_new: int) -> None:
        current = self.buffers
        if current is not None and current.batch == batch and current.capacity >= length \
                and current.max_new >= max_new:
            return
        capacity = (length + self.span_block - 1) // self.span_block * self.span_block
        if current is not None and current.batch == batch:
            capacity, max_new = max(capacity, current.capacity), max(max_new, current.max_new)
        self.release_graphs()
        self.buffers = None  # free the old cache before allocating the new one
        self.buffers = self._allocate(batch, capacity, max_new)

    def _allocate(self, batch: int, capacity: int, max_new: int) -> DecodeBuffers:
        config, device = self.model.config, self.device
        longs = dict(dtype=torch.long, device=device)
        return DecodeBuffers(
            kv=torch.zeros(config.n_layer, batch, capacity, 2 * config.n_embd, dtype=self.dtype, device=device),
            mask=torch.zeros(batch, capacity, dtype=self.dtype, device=device),
            logits=torch.zeros(batch, config.vocab_size, dtype=self.dtype, device=device),
            position=torch.zeros(batch, **longs),
            write_index=torch.zeros(1, **longs), step=torch.zeros(1, **longs),
            caps=torch.zeros(batch, **longs), finished=torch.zeros(batch, dtype=torch.bool, device=device),
            stops=torch.zeros(MAX_STOPS, **longs),
            out_tokens=torch.zeros(batch, max_new, **longs),
            out_logprobs=torch.zeros(batch, max_new, dtype=torch.float32, device=device),
            out_active=torch.zeros(batch, max_new, dtype=torch.bool, device=device),
        )

    def _capture(self, spans: list[int], spec: SamplingSpec, generator: torch.Generator | None) -> None:
        if generator is not self.graph_generator:
            self.release_graphs()  # graphs advance the generator they were captured with
            self.graph_generator = generator
        missing = [span for span in spans if (span, spec) not in self.graphs]
        if not missing:
            return
        rng_state = generator.get_state() if generator is not None else None
        self._reset_state()
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):  # warm-up: lazy library initialisation stays out of the graphs
            for span in missing:
                self._step(span, spec, generator)
        torch.cuda.current_stream(self.device).wait_stream(side)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        for span in missing:
            graph = torch.cuda.CUDAGraph()
            if generator is not None:
                graph.register_generator_state(generator)
            with torch.cuda.graph(graph, pool=self.pool):
                self._step(span, spec, generator)
            self.graphs[(span, spec)] = graph
            self.captures += 1
        if rng_state is not None:
            generator.set_state(rng_state)

    def _reset_state(self) -> None:
        """Harmless values for warm-up steps: in-range write positions, nothing finished."""
        b = self.buffers
        for tensor in (b.write_index, b.step, b.position):
            tensor.zero_()
        b.caps.fill_(b.max_new)
        b.finished.fill_(False)
        b.mask.zero_()

    # ------------------------------------------------------------------ the algorithm
    def _prefill(self, prompt_ids: Tensor, prompt_mask: Tensor, max_new_tokens: Sequence[int],
                 stops: list[int]) -> None:
        b, P = self.buffers, prompt_ids.shape[1]
        positions = (prompt_mask.long().cumsum(-1) - 1).clamp(min=0)
        mask = additive_mask(attention_mask_4d(prompt_mask, 0, P, self.device), self.dtype)
        hidden = self._forward(prompt_ids, positions, mask, span=P, write=None)
        b.logits.copy_(self._unembed(hidden[:, -1]))
        b.mask.fill_(float("-inf"))
        b.mask[:, :P].masked_fill_(prompt_mask, 0.0)
        b.position.copy_(prompt_mask.sum(-1))
        b.write_index.fill_(P)
        b.step.zero_()
        b.caps[:] = torch.tensor(list(max_new_tokens), dtype=torch.long)
        b.finished.copy_(b.caps <= 0)
        if stops:
            b.stops[:len(stops)] = torch.tensor(stops, dtype=torch.long)

    def _decode(self, spans: list[int], spec: SamplingSpec, generator: torch.Generator | None) -> int:
        """Run the steps; return how many ran."""
        n_max = len(spans)
        for step, span in enumerate(spans):
            if self.use_graphs:
                self.graphs[(span, spec)].replay()
            else:
                self._step(span, spec, generator)
            done = step + 1
            if done < n_max and done % self.check_every == 0 and bool(self.buffers.finished.all()):
                return done
        return n_max

    def _step(self, span: int, spec: SamplingSpec, generator: torch.Generator | None) -> None:
        """Sample one token per row from `logits`, record it, run the model on it. Graph-safe: no host
        reads, every result lands in a buffer."""
        b = self.buffers
        token, logprob = sample_tokens(b.logits, spec, generator)
        active = ~b.finished
        emitted = torch.where(active, token, spec.pad_id)
        b.out_tokens.index_copy_(1, b.step, emitted[:, None])
        b.out_logprobs.index_copy_(1, b.step, torch.where(active, logprob, 0.0)[:, None])
        b.out_active.index_copy_(1, b.step, active[:, None])
        done = b.step + 1 >= b.caps
        if spec.n_stops:
            done = done | (token[:, None] == b.stops[None, :spec.n_stops]).any(1)
        b.finished |= done
        b.mask.index_fill_(1, b.write_index, 0.0)
        hidden = self._forward(emitted[:, None], b.position[:, None], b.mask[:, None, None, :span],
                               span=span, write=b.write_index)
        b.logits.copy_(self._unembed(hidden[:, -1]))
        b.position += active
        b.step += 1
        b.write_index += 1

    def _forward(self, ids: Tensor, positions: Tensor, mask: Tensor, *, span: int,
                 write: Tensor | None) -> Tensor:
        """Final-LayerNorm hidden states [B, T, C] of `ids` [B, T]; their keys and values go to cache
        column `write` (a [1] tensor, T = 1) or to columns [0, T) (write None: the prefill)."""
        w, config = self.weights, self.model.config
        B, T = ids.shape
        C, H = config.n_embd, config.n_head
        eps = config.layer_norm_epsilon
        x = F.embedding(ids, w["wte.weight"]) + F.embedding(positions, w["wpe.weight"])
        for layer in range(config.n_layer):
            p = f"h.{layer}."
            h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
            qkv = F.linear(h, w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"])
            cache = self.buffers.kv[layer]
            if write is None:
                cache[:, :T] = qkv[..., C:]
            else:
                cache.index_copy_(1, write, qkv[..., C:])
            q = qkv[..., :C].view(B, T, H, C // H).transpose(1, 2)
            k = cache[:, :span, :C].view(B, span, H, C // H).transpose(1, 2)
            v = cache[:, :span, C:].view(B, span, H, C // H).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            y = y.transpose(1, 2).reshape(B, T, C)
            x = x + F.linear(y, w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"])
            h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
            h = F.gelu(F.linear(h, w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"]), approximate="tanh")
            x = x + F.linear(h, w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"])
        return F.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], eps)

    def _unembed(self, hidden: Tensor) -> Tensor:
        return F.linear(hidden, self.weights["wte.weight"])

    def _collect(self, prompt_ids: Tensor, prompt_mask: Tensor, steps: int) -> Generation:
        """Copy the results out of the buffers (the next call overwrites them), trimmed to the longest
        completion: the width `sampling.generate` returns."""
        b = self.buffers
        active = b.out_active[:, :steps]
        width = int(active.sum(1).max())
        completion_mask = active[:, :width].clone()
        completion_ids = b.out_tokens[:, :width].clone()
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        return Generation(
            input_ids=torch.cat([prompt_ids, completion_ids], dim=1),
            attention_mask=attention_mask,
            position_ids=(attention_mask.long().cumsum(-1) - 1).clamp(min=0),
            prompt_length=prompt_ids.shape[1],
            completion_ids=completion_ids,
            completion_mask=completion_mask,
            logprobs=b.out_logprobs[:, :width].clone(),
        )


class PlainDecoder:
    """`sampling.generate` behind the decoder interface (the CPU path, and the benchmark baseline)."""

    def __init__(self, model: GPT, *, ignore_stops: bool = False):
        self.model, self.ignore_stops = model, ignore_stops

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], *,
                 stop_ids: Iterable[int] = (), **kwargs) -> Generation:
        return generate(self.model, prompts, max_new_tokens, stop_ids=() if self.ignore_stops else stop_ids,
                        **kwargs)

    def close(self) -> None:
        pass


def make_decoder(model: GPT) -> StaticDecoder | None:
    """The fast path on CUDA; None (the plain sampler) elsewhere."""
    return StaticDecoder(model) if model.wte.weight.device.type == "cuda" else None


def sample_tokens(logits: Tensor, spec: SamplingSpec, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """`sampling.sample_next` with torch.multinomial's one-sample algorithm written out: no host sync."""
    logits = logits.float()
    if spec.greedy:
        token = logits.argmax(-1)
        return token, logits.log_softmax(-1).gather(-1, token[:, None])[:, 0]
    logits = logits / spec.temperature
    if spec.top_k is not None and spec.top_k > 0:
        logits = keep_top_k(logits, spec.top_k)
    if spec.top_p is not None and spec.top_p < 1.0:
        logits = keep_top_p(logits, spec.top_p)
    logprobs = logits.log_softmax(-1)
    probs = logprobs.exp()
    noise = torch.empty_like(probs).exponential_(1, generator=generator)
    token = (probs / noise).argmax(-1)
    return token, logprobs.gather(-1, token[:, None])[:, 0]


def additive_mask(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """Boolean mask (True = visible) -> 0 / -inf in `dtype`, as SDPA itself converts it."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def check_request(model: GPT, prompts: Sequence[Sequence[int]], max_new_tokens: Sequence[int]) -> None:
    if len(prompts) != len(max_new_tokens):
        raise ValueError(f"{len(prompts)} prompts but {len(max_new_tokens)} max_new_tokens")
    if not prompts or min(len(p) for p in prompts) == 0:
        raise ValueError("every prompt needs at least one token")
    longest = max(len(p) + n for p, n in zip(prompts, max_new_tokens))
    if longest > model.config.n_positions:
        raise ValueError(f"prompt + max_new_tokens reaches {longest} tokens, model context is {model.config.n_positions}")


def empty_generation(prompt_ids: Tensor, prompt_mask: Tensor) -> Generation:
    B = prompt_ids.shape[0]
    return Generation(input_ids=prompt_ids, attention_mask=prompt_mask,
                      position_ids=(prompt_mask.long().cumsum(-1) - 1).clamp(min=0),
                      prompt_length=prompt_ids.shape[1], completion_ids=prompt_ids.new_zeros((B, 0)),
                      completion_mask=prompt_mask.new_zeros((B, 0)),
                      logprobs=torch.zeros((B, 0), device=prompt_ids.device))
