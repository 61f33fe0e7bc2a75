"""Batched sampling and token log-probs on the tiny model."""

import torch

from rookworld.model.gpt2 import GPT
from rookworld.model.hub import create_tiny, load_model, save_pretrained
from rookworld.model.logprobs import token_logprobs
from rookworld.model.sampling import generate, keep_top_k, keep_top_p
from rookworld.model.tokenizer import ChessTokenizer
from train_helpers import prompt_ids


def test_greedy_batched_equals_one_by_one_with_early_stops(tiny_model):
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer)
    assert len({len(p) for p in prompts}) == len(prompts)
    caps = [12, 7, 10]
    unstopped = generate(model, prompts[:1], [12], greedy=True, pad_id=tokenizer.pad_id)
    # A token that the first row produces early, as an extra stop: that row must stop there.
    early_stop = int(unstopped.completion_ids[0, 3])
    stop_ids = [tokenizer.eos_id, tokenizer.newline_id, early_stop]

    batched = generate(model, prompts, caps, greedy=True, stop_ids=stop_ids, pad_id=tokenizer.pad_id)
    for row, (prompt, cap) in enumerate(zip(prompts, caps, strict=True)):
        alone = generate(model, [prompt], [cap], greedy=True, stop_ids=stop_ids, pad_id=tokenizer.pad_id)
        assert batched.completions()[row] == alone.completions()[0]
        length = int(alone.completion_mask.sum())
        assert (batched.logprobs[row, :length] - alone.logprobs[0, :length]).abs().max() <= 1e-5

    completions = batched.completions()
    assert len(completions[0]) <= 4 and completions[0][-1] == early_stop
    for row, completion in enumerate(completions):
        stops_at = [i for i, token in enumerate(completion) if token in stop_ids]
        assert stops_at in ([], [len(completion) - 1])  # stop token included, nothing after it
        assert len(completion) == caps[row] or stops_at
        assert len(completion) <= caps[row]
    mask = batched.completion_mask
    assert torch.equal(mask, mask.cummin(dim=1).values)  # True, then only False
    assert (batched.completion_ids[~mask] == tokenizer.pad_id).all()
    assert (batched.logprobs[~mask] == 0).all()
    assert batched.completion_ids.shape[1] == max(len(c) for c in completions)  # stopped early

    recomputed = token_logprobs(model, batched.input_ids, batched.attention_mask, batched.position_ids,
                                batched.prompt_length)
    assert (recomputed - batched.logprobs)[mask].abs().max() <= 1e-5


def test_generation_tensors_are_consistent(tiny_model):
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer)
    out = generate(model, prompts, [5, 5, 5], greedy=True, pad_id=tokenizer.pad_id)
    P = out.prompt_length
    assert P == max(len(p) for p in prompts)
    assert torch.equal(out.input_ids[:, P:], out.completion_ids)
    assert torch.equal(out.attention_mask[:, P:], out.completion_mask)
    for row, prompt in enumerate(prompts):
        assert out.input_ids[row, P - len(prompt):P].tolist() == prompt
        assert out.attention_mask[row, :P].sum() == len(prompt)
        real_positions = out.position_ids[row][out.attention_mask[row]]
        assert real_positions.tolist() == list(range(len(prompt) + 5))


def test_sampled_logprobs_match_token_logprobs(tiny_model):
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer)
    for temperature in (1.0, 0.7):
        out = generate(model, prompts, [16, 9, 12], temperature=temperature, pad_id=tokenizer.pad_id,
                       stop_ids=[tokenizer.eos_id, tokenizer.newline_id],
                       generator=torch.Generator().manual_seed(0))
        recomputed = token_logprobs(model, out.input_ids, out.attention_mask, out.position_ids,
                                    out.prompt_length, temperature=temperature)
        assert (recomputed - out.logprobs)[out.completion_mask].abs().max() <= 1e-5


def test_seeded_sampling_is_reproducible(tiny_model):
    model, tokenizer = tiny_model

    def sample(seed: int):
        return generate(model, prompt_ids(tokenizer), [10, 10, 10], temperature=1.0, top_k=50, top_p=0.9,
                        pad_id=tokenizer.pad_id, generator=torch.Generator().manual_seed(seed)).completion_ids

    assert torch.equal(sample(1), sample(1))
    assert not torch.equal(sample(1), sample(2))


def test_degenerate_top_k_and_top_p_equal_greedy(tiny_model):
    model, tokenizer = tiny_model
    prompts = prompt_ids(tokenizer)
    greedy = generate(model, prompts, [8, 8, 8], temperature=0, pad_id=tokenizer.pad_id)
    for filters in ({"top_k": 1}, {"top_p": 1e-6}):
        out = generate(model, prompts, [8, 8, 8], pad_id=tokenizer.pad_id,
                       generator=torch.Generator().manual_seed(0), **filters)
        assert torch.equal(out.completion_ids, greedy.completion_ids)
        assert torch.allclose(out.logprobs, torch.zeros_like(out.logprobs))  # a one-token distribution


def test_filters_keep_the_right_tokens():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    assert torch.isinf(keep_top_k(logits, 2)).tolist() == [[False, False, True, True]]
    probs = logits.softmax(-1)[0]  # about 0.64, 0.24, 0.09, 0.03
    assert torch.isinf(keep_top_p(logits, float(probs[0]) + 0.01)).tolist() == [[False, False, True, True]]
    assert torch.isinf(keep_top_p(logits.flip(-1), 0.5)).tolist() == [[True, True, True, False]]


def test_zero_cap_rows_produce_nothing(tiny_model):
    model, tokenizer = tiny_model
    out = generate(model, prompt_ids(tokenizer), [0, 3, 0], greedy=True, pad_id=tokenizer.pad_id)
    assert [len(c) for c in out.completions()] == [0, 3, 0]


def test_token_logprobs_chunking_and_gradients(tiny_model):
    model, tokenizer = tiny_model
    out = generate(model, prompt_ids(tokenizer), [9, 9, 9], greedy=True, pad_id=tokenizer.pad_id)
    args = (out.input_ids, out.attention_mask, out.position_ids, out.prompt_length)
    model.train()
    grads, results = [], []
    for chunk_size in (1, 4, 1000):
        model.zero_grad()
        logp, entropy = token_logprobs(model, *args, chunk_size=chunk_size, with_entropy=True)
        (logp[out.completion_mask].sum() + entropy.mean()).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
        results.append((logp.detach(), entropy.detach()))
    for (logp, entropy), grad in zip(results[1:], grads[1:], strict=True):
        assert torch.allclose(logp, results[0][0], atol=1e-6)
        assert torch.allclose(entropy, results[0][1], atol=1e-5)
        assert torch.allclose(grad, grads[0], atol=1e-5)

    with torch.no_grad():
        logits = model(out.input_ids, out.position_ids, out.attention_mask)[:, out.prompt_length - 1:-1]
    full = logits.log_softmax(-1)
    expected_entropy = -(full.exp() * full).sum(-1)
    assert torch.allclose(results[0][1], expected_entropy, atol=1e-5)


def test_tiny_model_save_load_sample_round_trip(tmp_path):
    directory = create_tiny(tmp_path / "tiny", seed=1)
    model, tokenizer = load_model(path=str(directory))
    built = GPT(model.config)  # what create_tiny saved, never written to disk
    built.init_weights(torch.Generator().manual_seed(1))
    save_pretrained(model, tokenizer, tmp_path / "saved_again")
    reloaded, reloaded_tokenizer = load_model(path=str(tmp_path / "saved_again"))

    def sample(policy, tok):
        return generate(policy.eval(), prompt_ids(tok), [20, 20, 20], temperature=1.0, top_k=40,
                        stop_ids=[tok.eos_id, tok.newline_id], pad_id=tok.pad_id,
                        generator=torch.Generator().manual_seed(0))

    out = sample(model, tokenizer)
    texts = [tokenizer.decode(ids) for ids in out.completions()]
    for policy, tok in ((built, ChessTokenizer.tiny()), (reloaded, reloaded_tokenizer)):
        again = sample(policy, tok)
        assert torch.equal(again.completion_ids, out.completion_ids)
        assert torch.equal(again.completion_mask, out.completion_mask)
        assert [tok.decode(ids) for ids in again.completions()] == texts
    assert all(1 <= len(ids) <= 20 for ids in out.completions())
