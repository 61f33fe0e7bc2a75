"""The fast path's logic on the CPU: StaticDecoder (no CUDA graphs here) against the plain sampler.

The decoder runs the same algorithm with the same generator draws, so tokens must be identical, also
when sampling; on the GPU the benchmark's self-check repeats these comparisons with graphs on.
"""

import json
import subprocess
import sys

import pytest
import torch

from rookworld.model.fast_sampling import PlainDecoder, StaticDecoder, make_decoder
from rookworld.model.sampling import generate
from train_helpers import PROMPT_TEXTS, prompt_ids

SETTINGS = [dict(greedy=True), dict(temperature=1.0), dict(temperature=0.7, top_k=20),
            dict(temperature=1.3, top_p=0.8)]


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
def test_decoder_gives_the_plain_samplers_tokens(tiny_model, settings):
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer, repeat=2)
    caps = [30, 9, 21, 14, 30, 5]
    stops = early_stop_ids(model, tokenizer, prompts)
    common = dict(stop_ids=stops, pad_id=tokenizer.pad_id, **settings)
    plain = generate(model, prompts, caps, generator=torch.Generator().manual_seed(7), **common)
    decoder = StaticDecoder(model, check_every=4)
    fast = decoder.generate(prompts, caps, generator=torch.Generator().manual_seed(7), **common)
    assert_same_generation(plain, fast, logprob_tol=1e-5)
    lengths = fast.completion_mask.sum(1)
    assert lengths.min() < lengths.max() <= max(caps)  # early stops and per-row caps were exercised
    assert decoder.buffers.shape[1] == len(PROMPT_TEXTS)  # one prompt cache row per distinct prompt


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a GPU"))])
def test_rows_that_stop_early_are_reported_with_their_final_completions(tiny_model, device):
    """on_finished gets each row at most once, at a check after it stopped, with exactly the
    completion the result holds; rows still running at the last check are left to the caller.
    On CUDA the reported completions are copied while the GPU runs the next steps (graphs on)."""
    model, tokenizer = tiny_model
    model.to(device)
    prompts = prompt_ids(tokenizer, repeat=2)
    caps = [30, 9, 21, 14, 30, 5]
    reports: list[tuple[int, list[int]]] = []
    decoder = StaticDecoder(model, check_every=4)
    fast = decoder.generate(prompts, caps, temperature=1.0, stop_ids=early_stop_ids(model, tokenizer, prompts),
                            pad_id=tokenizer.pad_id, generator=torch.Generator(device).manual_seed(7),
                            on_finished=lambda rows, completions: reports.extend(zip(rows, completions)))
    final = fast.completions()
    rows = [row for row, _ in reports]
    assert len(rows) == len(set(rows)) and 0 < len(rows) < len(prompts)
    assert all(ids == final[row] for row, ids in reports)
    assert max(len(final[row]) for row in rows) < max(len(ids) for ids in final)  # the longest row ran on


def test_decoder_buffers_serve_many_batches(tiny_model):
    """One decoder across batch sizes, prompt widths and caps: each result equals a fresh plain run."""
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer, repeat=3)
    decoder = StaticDecoder(model, check_every=3)
    for rows, caps in [(6, [12] * 6), (6, [3] * 6), (4, [40] * 4), (9, [7] * 9), (6, [12] * 6)]:
        batch = prompts[-rows:] if rows % 2 else prompts[:rows]
        kwargs = dict(temperature=1.0, stop_ids=[tokenizer.eos_id], pad_id=tokenizer.pad_id)
        plain = generate(model, batch, caps, generator=torch.Generator().manual_seed(rows), **kwargs)
        fast = decoder.generate(batch, caps, generator=torch.Generator().manual_seed(rows), **kwargs)
        assert_same_generation(plain, fast, logprob_tol=1e-5)
    assert decoder.buffers.shape[0] == 6 and decoder.buffers.shape[3] >= 12


def test_decoder_sees_weight_updates(tiny_model):
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer, repeat=2)
    decoder = StaticDecoder(model)
    before = decoder.generate(prompts, [6] * 6, greedy=True, pad_id=tokenizer.pad_id)
    with torch.no_grad():
        model.ln_f.weight.neg_()  # every logit changes sign: the greedy tokens change
    after = decoder.generate(prompts, [6] * 6, greedy=True, pad_id=tokenizer.pad_id)
    assert after.completion_ids[0, 0] != before.completion_ids[0, 0]
    assert_same_generation(generate(model, prompts, [6] * 6, greedy=True, pad_id=tokenizer.pad_id), after, 1e-5)


def test_ignore_stops_runs_every_row_to_its_cap(tiny_model):
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer, repeat=2)
    caps = [10, 4, 7, 10, 4, 7]
    stops = early_stop_ids(model, tokenizer, prompts)
    for decoder in (StaticDecoder(model, ignore_stops=True), PlainDecoder(model, ignore_stops=True)):
        out = decoder.generate(prompts, caps, greedy=True, stop_ids=stops, pad_id=tokenizer.pad_id)
        assert out.completion_mask.sum(1).tolist() == caps


def test_results_do_not_alias_the_decoders_buffers(tiny_model):
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer, repeat=2)
    decoder = StaticDecoder(model)
    first = decoder.generate(prompts, [5] * 6, greedy=True, pad_id=tokenizer.pad_id)
    kept = first.completion_ids.clone()
    decoder.generate(prompts, [5] * 6, temperature=1.0, pad_id=tokenizer.pad_id,
                     generator=torch.Generator().manual_seed(1))
    assert torch.equal(first.completion_ids, kept)


def test_plain_sampler_stays_the_cpu_path(tiny_model):
    model, _ = tiny_model
    assert isinstance(make_decoder(model, check_every=16), PlainDecoder)


def test_activation_checkpointing_changes_nothing_but_memory(tiny_model):
    from rookworld.model.logprobs import token_logprobs

    model, tokenizer = tiny_model
    ids = torch.randint(0, tokenizer.vocab_size, (3, 20), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[0, :4] = False
    positions = (mask.long().cumsum(1) - 1).clamp(min=0)
    results = []
    for recompute in (False, True):
        model.activation_checkpointing = recompute
        model.zero_grad(set_to_none=True)
        logp = token_logprobs(model, ids, mask, positions, 5)
        logp.sum().backward()
        results.append((logp.detach(), [p.grad.clone() for p in model.parameters()]))
    assert torch.equal(results[0][0], results[1][0])
    assert all(torch.equal(a, b) for a, b in zip(results[0][1], results[1][1], strict=True))


@pytest.mark.slow
def test_bench_runs_real_train_steps_on_the_cpu(tmp_path):
    """The benchmark end to end on the tiny model: self-check, timed steps, trials, the JSON."""
    from hydra import compose, initialize_config_dir

    from rookworld.bench.steps import format_report, run, write_results
    from rookworld.app.config import load_bench
    from train_helpers import CONF_DIR

    overrides = ["model=tiny", "device=cpu", "prompts_per_step=2", "grpo.group_size=2", "grpo.micro_batch_size=2",
                 "sampling.max_new_tokens.P=6", "sampling.max_new_tokens.A=6", "bench.warmup=1", "bench.steps=2",
                 "bench.trials=2", "bench.trial_steps=1", "bench.trl=false"]
    with initialize_config_dir(config_dir=CONF_DIR):
        cfg = compose("bench", overrides=overrides)
    results = run(load_bench(cfg))
    assert results["self_check"]["ok"]
    shuffled = results["self_check"]["shuffled_micro_batches"]
    assert shuffled["ok"] and shuffled["fast_path_subsets"] > 0 and shuffled["max_logprob_diff"] < 1e-4
    assert results["fast"]["summary"]["tokens_per_step"] == 4 * 6  # full length: every row runs to its cap
    assert results["trials"]["errors"] == []
    assert "update" in format_report(results)
    assert write_results(results, str(tmp_path / "bench.json"))[-1].is_file()


PLANTED_FAILURE = """
import runpy, sys
import rookworld.bench.checks as checks
plain = checks.generate
def planted(*args, **kwargs):  # the plain sampler's first token of row 0 changed: the fast path no longer matches it
    generation = plain(*args, **kwargs)
    generation.completion_ids[0, 0] += 1
    return generation
checks.generate = planted
sys.argv[0] = checks.__file__.replace("checks.py", "__main__.py")
runpy.run_module("rookworld.bench", run_name="__main__")
"""


@pytest.mark.slow
def test_a_failed_self_check_makes_the_bench_exit_non_zero_with_one_line(tmp_path):
    overrides = ["model=tiny", "device=cpu", "prompts_per_step=2", "grpo.group_size=2", "sampling.max_new_tokens.P=6",
                 "sampling.max_new_tokens.A=6", "bench.trl=false", f"hydra.run.dir={tmp_path}"]
    proc = subprocess.run([sys.executable, "-c", PLANTED_FAILURE, *overrides], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("rookworld: error: self-check failed: fp32_greedy: identical_rows=3 (must be == 4)")
    assert "[fast path]" not in proc.stdout  # nothing is timed after a failed check
    assert not json.loads((tmp_path / "bench.json").read_text())["self_check"]["ok"]


# ---------------------------------------------------------------- the Triton kernels
# They run on CUDA, or on the CPU under Triton's interpreter: TRITON_INTERPRET=1 pytest tests/test_fast_path.py
# (with triton installed; CI has neither, and skips these; Triton 3.6's interpreter needs numpy < 2.4).
def triton_runs_here() -> bool:
    import os

    from rookworld.model import decode_kernels
    return decode_kernels.triton is not None and os.environ.get("TRITON_INTERPRET") == "1"


needs_triton = pytest.mark.skipif(not triton_runs_here(), reason="needs triton with TRITON_INTERPRET=1")


# Kernel layouts: one without splits (the defaults with half-depth splits off, at the test model's
# width), and one where every split is exercised: sampling over vocabulary chunks, split-K products
# (2-8 partial sums per product, some half-depth), several key blocks per attention program.
WHOLE = dict(SAMPLE_CHUNK=4096, LINEAR_BLOCK_K=256, ATTENTION_BLOCK=64, LINEAR_HALF_DEPTH_BELOW=0)
SPLIT = dict(SAMPLE_CHUNK=512, LINEAR_BLOCK_K=16, ATTENTION_BLOCK=16)


@pytest.fixture(scope="module")
def head48_model(tmp_path_factory):
    """A tiny random model whose heads are 48 wide (not a power of two, like rookworld_tiny's)."""
    from rookworld.model.hub import create_tiny, load_pretrained

    model, tokenizer = load_pretrained(str(create_tiny(tmp_path_factory.mktemp("head48"), n_head=2, n_embd=96)))
    assert model.config.head_dim == 48
    return model, tokenizer


def assert_kernels_give_the_plain_samplers_tokens(model, tokenizer, settings, layout, monkeypatch) -> None:
    from rookworld.model import decode_kernels

    for name, value in layout.items():
        monkeypatch.setattr(decode_kernels, name, value)
    prompts = prompt_ids(tokenizer, repeat=2)
    caps = [16, 9, 12, 7, 16, 5]
    common = dict(stop_ids=early_stop_ids(model, tokenizer, prompts), pad_id=tokenizer.pad_id, **settings)
    plain = generate(model, prompts, caps, generator=torch.Generator().manual_seed(3), **common)
    decoder = StaticDecoder(model, use_kernels=True, check_every=4)
    fast = decoder.generate(prompts, caps, generator=torch.Generator().manual_seed(3), **common)
    assert_same_generation(plain, fast, logprob_tol=1e-4)
    splits = set(decoder.splits.values())
    assert splits == {1} if layout["LINEAR_BLOCK_K"] == 256 else min(splits) > 1


@needs_triton
@pytest.mark.parametrize("settings", SETTINGS[:3], ids=["greedy", "sampled", "top_k"])
@pytest.mark.parametrize("layout", [WHOLE, SPLIT], ids=["whole", "split"])
def test_fused_decode_kernels_give_the_plain_samplers_tokens(tiny_model, settings, layout, monkeypatch):
    assert_kernels_give_the_plain_samplers_tokens(*tiny_model, settings, layout, monkeypatch)


@needs_triton
@pytest.mark.parametrize("settings, layout", [(SETTINGS[0], WHOLE), (SETTINGS[1], SPLIT)],
                         ids=["greedy-whole", "sampled-split"])
def test_fused_decode_kernels_serve_a_head_size_that_is_not_a_power_of_two(head48_model, settings, layout,
                                                                           monkeypatch):
    assert_kernels_give_the_plain_samplers_tokens(*head48_model, settings, layout, monkeypatch)


@needs_triton
@pytest.mark.parametrize("head_dim", [32, 48])
def test_decode_attention_matches_float64_attention_and_writes_only_its_slots(head_dim):
    """Random inputs, every row at its own prompt start: output against a float64 reference, the
    new k/v in the completion cache at `step` and not one other element of the caches touched."""
    from rookworld.model import decode_kernels

    g = torch.Generator().manual_seed(head_dim)
    B, H, D, U, P_cap, N_cap, S, step = 3, 2, head_dim, 2, 40, 24, 2, 17
    C = H * D
    partials = torch.randn(S, B, 3 * C, generator=g)
    bias = torch.randn(3 * C, generator=g)
    prompt_kv = torch.randn(2, U, H, P_cap, D, generator=g)
    completion_kv = torch.randn(2, B, H, N_cap, D, generator=g)
    row_start, leader = torch.tensor([0, 13, 39]), torch.tensor([0, 1, 1])
    out = torch.full((B, C), float("nan"))
    before = completion_kv.clone()
    decode_kernels.decode_attention(partials, bias, prompt_kv, row_start, leader, completion_kv,
                                    torch.tensor([step]), out)

    q, k, v = (partials.sum(0) + bias).double().view(B, 3, H, D).unbind(1)
    expected = torch.empty(B, H, D, dtype=torch.float64)
    for row in range(B):
        prompt = prompt_kv[:, leader[row], :, row_start[row]:].double()  # [2, H, n, D]
        keys = torch.cat([prompt[0], before[0, row, :, :step].double(), k[row][:, None]], dim=1)
        values = torch.cat([prompt[1], before[1, row, :, :step].double(), v[row][:, None]], dim=1)
        weights = torch.softmax((keys @ q[row][:, :, None])[..., 0] / D ** 0.5, dim=-1)
        expected[row] = (weights[:, :, None] * values).sum(1)
    assert not out.isnan().any()
    assert (out.double() - expected.view(B, C)).norm() <= 1e-5 * expected.norm()
    after = completion_kv.clone()
    assert torch.allclose(after[:, :, :, step], torch.stack([k, v]).float(), atol=1e-6)
    after[:, :, :, step] = before[:, :, :, step]
    assert torch.equal(after, before)


@needs_triton
def test_fused_logprobs_match_the_chunked_path(tiny_model):
    from rookworld.model.logprobs import token_logprobs

    model, tokenizer = tiny_model
    ids = torch.randint(0, tokenizer.vocab_size, (4, 30), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[:2, :5] = False
    positions = (mask.long().cumsum(1) - 1).clamp(min=0)
    outputs = {}
    for fused in (False, True):
        model.zero_grad(set_to_none=True)
        logp, entropy = token_logprobs(model, ids, mask, positions, 8, temperature=0.8, with_entropy=True,
                                       fused=fused)
        (logp.sum() + 0.1 * entropy.sum()).backward()
        outputs[fused] = logp.detach(), entropy.detach(), [p.grad.clone() for p in model.parameters()]
    (logp_a, entropy_a, grads_a), (logp_b, entropy_b, grads_b) = outputs[False], outputs[True]
    assert (logp_a - logp_b).abs().max() < 1e-5 and (entropy_a - entropy_b).abs().max() < 1e-5
    for a, b in zip(grads_a, grads_b, strict=True):
        assert (a - b).norm() <= 1e-5 * a.norm() + 1e-7


@pytest.mark.slow
def test_evaluation_through_the_decoder_scores_like_the_plain_sampler():
    """The trainer evaluates with its decoder on CUDA; on the same model the scores must not move."""
    from rookworld.app.config import ASSETS_DIR
    from rookworld.data.positions import load_arbiter_problems, load_policy_problems
    from rookworld.judge.evaluate import evaluate
    from rookworld.model.hub import load_model
    from rookworld.judge.rewards import GraduatedReward

    model, tokenizer = load_model(source=str(ASSETS_DIR / "rookworld_tiny"))
    problems = load_policy_problems("validation")[:6] + load_arbiter_problems("validation")[:6]
    caps = {"P": 112, "A": 64}
    plain = evaluate(PlainDecoder(model), tokenizer, problems, GraduatedReward(), caps, 8, 0, score="graduated")
    fast = evaluate(StaticDecoder(model), tokenizer, problems, GraduatedReward(), caps, 8, 0, score="graduated",
                    generator=torch.Generator().manual_seed(0))
    assert fast.metrics == plain.metrics
    assert plain.metrics["eval/A/format"] > 0.5  # real completions, not empty ones
