"""The fast path's logic on the CPU: StaticDecoder (no CUDA graphs here) against the plain sampler.

The decoder runs the same algorithm with the same generator draws, so tokens must be identical, also
when sampling; on the GPU the benchmark's self-check repeats these comparisons with graphs on.
"""

import pytest
import torch

from rookworld.model.fast_sampling import PlainDecoder, StaticDecoder, make_decoder
from rookworld.model.sampling import generate

PROMPT_TEXTS = [
    "P: rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
    "A: 8/8/8/4k3/8/8/4K3/8 w - - 0 1+e2e3+e2e3+",
    "P: 8/8/8/8/8/8/8/K1k5 w - - 0 1",
]
SETTINGS = [dict(greedy=True), dict(temperature=1.0), dict(temperature=0.7, top_k=20),
            dict(temperature=1.3, top_p=0.8)]


def prompt_ids(tokenizer, repeat: int = 2) -> list[list[int]]:
    return [[tokenizer.eos_id] + tokenizer.encode(text) for text in PROMPT_TEXTS] * repeat


def early_stop_ids(model, tokenizer, prompts) -> list[int]:
    """The usual stops plus a token the first row emits early, so some rows stop before their cap."""
    first = generate(model, prompts[:1], [8], greedy=True, pad_id=tokenizer.pad_id)
    return [tokenizer.eos_id, tokenizer.newline_id, int(first.completion_ids[0, 2])]


def assert_same_generation(plain, fast, logprob_tol: float) -> None:
    assert fast.prompt_length == plain.prompt_length
    for name in ("input_ids", "attention_mask", "position_ids", "completion_ids", "completion_mask"):
        assert torch.equal(getattr(fast, name), getattr(plain, name)), name
    assert (fast.logprobs - plain.logprobs).abs().max() <= logprob_tol


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "-".join(f"{k}{v}" for k, v in s.items()))
@pytest.mark.parametrize("span_block", [1, 16])
def test_decoder_gives_the_plain_samplers_tokens(tiny_model, settings, span_block):
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer)
    caps = [30, 9, 21, 14, 30, 5]
    stops = early_stop_ids(model, tokenizer, prompts)
    common = dict(stop_ids=stops, pad_id=tokenizer.pad_id, **settings)
    plain = generate(model, prompts, caps, generator=torch.Generator().manual_seed(7), **common)
    decoder = StaticDecoder(model, span_block=span_block, check_every=4)
    fast = decoder.generate(prompts, caps, generator=torch.Generator().manual_seed(7), **common)
    # span_block=1 attends over exactly the plain sampler's keys: bit-identical log-probs
    assert_same_generation(plain, fast, logprob_tol=0.0 if span_block == 1 else 1e-5)
    lengths = fast.completion_mask.sum(1)
    assert lengths.min() < lengths.max() <= max(caps)  # early stops and per-row caps were exercised


def test_decoder_buffers_serve_many_batches(tiny_model):
    """One decoder across batch sizes, prompt widths and caps: each result equals a fresh plain run."""
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer, repeat=3)
    decoder = StaticDecoder(model, span_block=8, check_every=3)
    for rows, caps in [(6, [12] * 6), (6, [3] * 6), (4, [40] * 4), (9, [7] * 9), (6, [12] * 6)]:
        batch = prompts[-rows:] if rows % 2 else prompts[:rows]
        kwargs = dict(temperature=1.0, stop_ids=[tokenizer.eos_id], pad_id=tokenizer.pad_id)
        plain = generate(model, batch, caps, generator=torch.Generator().manual_seed(rows), **kwargs)
        fast = decoder.generate(batch, caps, generator=torch.Generator().manual_seed(rows), **kwargs)
        assert_same_generation(plain, fast, logprob_tol=1e-5)
    assert decoder.buffers.batch == 6 and decoder.buffers.max_new >= 12


def test_decoder_sees_weight_updates(tiny_model):
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer)
    decoder = StaticDecoder(model)
    before = decoder.generate(prompts, [6] * 6, greedy=True, pad_id=tokenizer.pad_id)
    with torch.no_grad():
        model.ln_f.weight.neg_()  # every logit changes sign: the greedy tokens change
    after = decoder.generate(prompts, [6] * 6, greedy=True, pad_id=tokenizer.pad_id)
    assert after.completion_ids[0, 0] != before.completion_ids[0, 0]
    assert_same_generation(generate(model, prompts, [6] * 6, greedy=True, pad_id=tokenizer.pad_id), after, 1e-5)


def test_ignore_stops_runs_every_row_to_its_cap(tiny_model):
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer)
    caps = [10, 4, 7, 10, 4, 7]
    stops = early_stop_ids(model, tokenizer, prompts)
    for decoder in (StaticDecoder(model, ignore_stops=True), PlainDecoder(model, ignore_stops=True)):
        out = decoder.generate(prompts, caps, greedy=True, stop_ids=stops, pad_id=tokenizer.pad_id)
        assert out.completion_mask.sum(1).tolist() == caps


def test_results_do_not_alias_the_decoders_buffers(tiny_model):
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer)
    decoder = StaticDecoder(model)
    first = decoder.generate(prompts, [5] * 6, greedy=True, pad_id=tokenizer.pad_id)
    kept = first.completion_ids.clone()
    decoder.generate(prompts, [5] * 6, temperature=1.0, pad_id=tokenizer.pad_id,
                     generator=torch.Generator().manual_seed(1))
    assert torch.equal(first.completion_ids, kept)


def test_plain_sampler_stays_the_cpu_path(tiny_model):
    model, _ = tiny_model
    assert make_decoder(model) is None
