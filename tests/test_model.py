"""GPT-2 model: parity with transformers, left padding, KV cache, no dropout; the tiny tokenizer."""

import json
import random
from pathlib import Path

import chess
import pytest
import safetensors.torch
import torch

from rookworld.model.gpt2 import GPT, GPTConfig, KVCache
from rookworld.model.hub import load_pretrained, save_pretrained
from rookworld.model.tokenizer import TINY_TOKENIZER_DIR, ChessTokenizer, arbiter_document, policy_document

SMALL = dict(n_positions=64, n_embd=32, n_layer=2, n_head=4)
PAD = 0


def perturbed_gpt(vocab_size: int, seed: int = 0) -> GPT:
    """A small GPT whose every parameter (biases, LayerNorms too) is random, so parity checks all of them."""
    model = GPT(GPTConfig(vocab_size=vocab_size, **SMALL))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 0.1)
    return model.eval()


def left_padded_batch(vocab_size: int, lengths=(12, 9, 4), seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.full((len(lengths), width), PAD)
    mask = torch.zeros((len(lengths), width), dtype=torch.bool)
    for row, length in enumerate(lengths):
        ids[row, width - length:] = torch.randint(1, vocab_size, (length,), generator=generator)
        mask[row, width - length:] = True
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    return ids, mask, positions


def transformers_logits(directory: Path, ids, mask, positions) -> torch.Tensor:
    from transformers import GPT2LMHeadModel

    hf_model = GPT2LMHeadModel.from_pretrained(directory, dtype=torch.float32).eval()
    with torch.no_grad():
        return hf_model(input_ids=ids, attention_mask=mask.long(), position_ids=positions).logits


def test_logit_parity_ours_saved_loaded_by_transformers(tmp_path, tiny_tokenizer):
    model = perturbed_gpt(tiny_tokenizer.vocab_size)
    save_pretrained(model, tiny_tokenizer, tmp_path)
    ids, mask, positions = left_padded_batch(tiny_tokenizer.vocab_size)
    with torch.no_grad():
        ours = model(ids, positions, mask)
    theirs = transformers_logits(tmp_path, ids, mask, positions)
    assert (ours - theirs)[mask].abs().max() <= 1e-4


def test_logit_parity_transformers_saved_loaded_by_ours(tmp_path, tiny_tokenizer):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    hf_config = GPT2Config(vocab_size=tiny_tokenizer.vocab_size, n_positions=64, n_embd=32, n_layer=2,
                           n_head=4, resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1)
    hf_model = GPT2LMHeadModel(hf_config)
    with torch.no_grad():
        for param in hf_model.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    hf_model.save_pretrained(tmp_path)
    tiny_tokenizer.save(tmp_path)
    ids, mask, positions = left_padded_batch(tiny_tokenizer.vocab_size, lengths=(5, 12, 1, 8))
    with torch.no_grad():
        theirs = hf_model.eval()(input_ids=ids, attention_mask=mask.long(), position_ids=positions).logits
    model, _ = load_pretrained(str(tmp_path))
    with torch.no_grad():
        ours = model(ids, positions, mask)
    assert (ours - theirs)[mask].abs().max() <= 1e-4


def test_positions_default_to_real_token_count():
    model = perturbed_gpt(50)
    ids, mask, positions = left_padded_batch(50)
    with torch.no_grad():
        explicit = model(ids, positions, mask)
        default = model(ids, None, mask)
    assert torch.equal(explicit, default)


def test_left_padding_does_not_change_real_token_logits():
    model = perturbed_gpt(50)
    ids, mask, positions = left_padded_batch(50)
    with torch.no_grad():
        batched = model(ids, positions, mask)
        for row in range(ids.shape[0]):
            alone = model(ids[row, mask[row]][None])
            assert (batched[row, mask[row]] - alone[0]).abs().max() <= 1e-5


@pytest.mark.parametrize("checkpointing,group_size", [(False, 0), (True, 0), (False, 3), (True, 3)])
def test_shared_prompt_forward_equals_each_row_with_its_own_prompt(checkpointing, group_size):
    """GPT.completion_hidden runs each distinct prompt once; its states, and the gradients through
    them, must equal the plain forward of every row's prompt + completion."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, n_positions=64, n_embd=48, n_layer=2, n_head=4)).double()
    model.activation_checkpointing = checkpointing
    P, N = 5, 4
    prompt_mask = torch.tensor([[False, False, True, True, True], [True] * 5])
    prompt_ids = torch.randint(0, 50, (2, P)) * prompt_mask
    group = torch.tensor([0, 0, 0, 1, 1, 1])               # two groups of three rows
    completion_ids = torch.randint(0, 50, (6, N))
    completion_mask = torch.ones(6, N, dtype=torch.bool)
    completion_mask[1, 2:] = completion_mask[4, 3:] = False  # rows that stopped early
    row_mask = torch.cat([prompt_mask[group], completion_mask], dim=1)
    positions = (row_mask.long().cumsum(-1) - 1).clamp(min=0)
    weights = torch.randn(6, N, 48, dtype=torch.float64)

    def states_and_gradient(shared: bool):
        model.zero_grad(set_to_none=True)
        if shared:
            hidden = model.completion_hidden(prompt_ids, prompt_mask, positions[:2 * 3:3, :P], group,
                                             completion_ids, completion_mask, positions[:, P:], group_size)
        else:
            hidden = model.hidden(torch.cat([prompt_ids[group], completion_ids], 1), positions, row_mask)[:, P - 1:-1]
        (hidden * weights * completion_mask[..., None]).sum().backward()
        return hidden.detach(), torch.cat([p.grad.flatten() for p in model.parameters()])

    (shared, shared_grad), (plain, plain_grad) = states_and_gradient(True), states_and_gradient(False)
    assert (shared - plain)[completion_mask].abs().max() <= 1e-12
    assert (shared_grad - plain_grad).abs().max() <= 1e-10


def test_kv_cache_prefill_then_steps_matches_full_forward():
    model = perturbed_gpt(50)
    ids, mask, positions = left_padded_batch(50)
    prefill = 6
    with torch.no_grad():
        full = model(ids, positions, mask)
        cache = KVCache.for_model(model, ids.shape[0], ids.shape[1])
        pieces = [model(ids[:, :prefill], positions[:, :prefill], mask[:, :prefill], cache)]
        for t in range(prefill, ids.shape[1]):
            pieces.append(model(ids[:, t:t + 1], positions[:, t:t + 1], mask[:, :t + 1], cache))
    assert cache.length == ids.shape[1]
    assert (torch.cat(pieces, dim=1) - full)[mask].abs().max() <= 1e-5


def test_kv_cache_overflow_raises():
    model = perturbed_gpt(50)
    cache = KVCache.for_model(model, 1, 4)
    with pytest.raises(ValueError, match="overflow"):
        model(torch.ones((1, 5), dtype=torch.long), kv_cache=cache)


def test_checkpoint_dropout_is_ignored(tiny_model_copy):
    config = json.loads((tiny_model_copy / "config.json").read_text())
    config.update(resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1, summary_first_dropout=0.1)
    (tiny_model_copy / "config.json").write_text(json.dumps(config))
    model, tokenizer = load_pretrained(str(tiny_model_copy))
    assert not any(isinstance(module, torch.nn.Dropout) for module in model.modules())
    model.train()
    ids = torch.tensor([[tokenizer.eos_id] + tokenizer.encode("P: 8/8/8/8/8/8/8/8 w - - 0 1")])
    assert torch.equal(model(ids), model(ids))


def test_bf16_weights_are_cast_to_requested_dtype(tmp_path, tiny_tokenizer):
    model = perturbed_gpt(tiny_tokenizer.vocab_size).to(torch.bfloat16)
    save_pretrained(model, tiny_tokenizer, tmp_path)
    loaded, _ = load_pretrained(str(tmp_path), dtype=torch.float32)
    assert loaded.wte.weight.dtype == torch.float32
    for (name, ours), (their_name, theirs) in zip(loaded.state_dict().items(), model.state_dict().items(),
                                                  strict=True):
        assert name == their_name and torch.equal(ours, theirs.float()), name


def test_loads_unprefixed_names_with_lm_head_and_mask_buffers(tiny_model_copy, tiny_model_dir):
    tensors = safetensors.torch.load_file(str(tiny_model_copy / "model.safetensors"))
    tensors = {name.removeprefix("transformer."): t for name, t in tensors.items()}
    tensors["lm_head.weight"] = tensors["wte.weight"].clone()
    tensors["h.0.attn.bias"] = torch.ones(1, 1, 8, 8)
    safetensors.torch.save_file(tensors, str(tiny_model_copy / "model.safetensors"))
    model, _ = load_pretrained(str(tiny_model_copy))
    reference, _ = load_pretrained(str(tiny_model_dir))
    for (name, ours), (their_name, theirs) in zip(model.state_dict().items(), reference.state_dict().items(),
                                                  strict=True):
        assert name == their_name and torch.equal(ours, theirs), name


def test_tokenizer_reads_gpt2_style_vocab_and_merges(tmp_path, tiny_tokenizer):
    tiny_tokenizer.tokenizer.model.save(str(tmp_path))  # writes vocab.json + merges.txt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merges.txt", "vocab.json"]
    from_files = ChessTokenizer.from_directory(tmp_path)
    text = "A: 8/8/8/8/8/8/8/8 w - - 0 1+e2e4+e2e4+"
    assert from_files.encode("e2e4 b7b8q\n") == tiny_tokenizer.encode("e2e4 b7b8q\n")
    assert from_files.decode(from_files.encode(text)) == text
    assert from_files.eos_id == tiny_tokenizer.eos_id


# ---- the tiny tokenizer ----


def sample_documents() -> list[tuple[str, str]]:
    """(prompt, document) pairs of both tasks along a seeded random game."""
    board, rng, history = chess.Board(), random.Random(7), []
    pairs = []
    for _ in range(12):
        move = rng.choice(list(board.legal_moves))
        recent = " ".join((history + [move.uci()])[-10:])
        pairs.append((f"P: {board.fen()}", policy_document(board, rng)))
        pairs.append((f"A: {board.fen()}+{move.uci()}+{recent}+", arbiter_document(board, move, history)))
        board.push(move)
        history.append(move.uci())
    return pairs


def test_tiny_tokenizer_is_shipped_and_small(tiny_tokenizer):
    assert (TINY_TOKENIZER_DIR / "tokenizer.json").stat().st_size < 300_000
    assert 1024 <= tiny_tokenizer.vocab_size <= 4096
    assert tiny_tokenizer.pad_id == tiny_tokenizer.eos_id
    assert tiny_tokenizer.encode("<|endoftext|>") == [tiny_tokenizer.eos_id]
    assert tiny_tokenizer.encode("\n") == [tiny_tokenizer.newline_id]


def test_tiny_tokenizer_round_trips_task_documents(tiny_tokenizer):
    for _, document in sample_documents():
        ids = tiny_tokenizer.encode(document)
        assert tiny_tokenizer.decode(ids) == document
        assert ids[-1] == tiny_tokenizer.newline_id
        assert ids.count(tiny_tokenizer.newline_id) == 1


def test_tiny_tokenizer_prompts_are_token_prefixes(tiny_tokenizer):
    for prompt, document in sample_documents():
        assert document.startswith(prompt)
        prompt_ids = tiny_tokenizer.encode(prompt)
        assert tiny_tokenizer.encode(document)[:len(prompt_ids)] == prompt_ids, prompt


def test_tiny_tokenizer_keeps_padding_spaces_as_single_tokens(tiny_tokenizer):
    space = tiny_tokenizer.encode(" ")
    assert len(space) == 1
    ids = tiny_tokenizer.encode("1    M:")
    assert ids[1:4] == space * 3  # then " M" fused, as in GPT-2
    assert tiny_tokenizer.decode(ids[4:]) == " M:"


def test_every_newline_only_token_is_a_stop_token(tmp_path: Path) -> None:
    from rookworld.model.sampling import Generation
    from rookworld.judge.rollout import Rollout, decode_completions, stopped

    tiny = ChessTokenizer.from_directory(TINY_TOKENIZER_DIR)
    assert tiny.stop_ids == (tiny.eos_id, tiny.newline_id)
    # A GPT-2-style byte-level BPE ("Ċ" is "\n", "Ġ" a space) where "\n\n" is its own token, as in GPT-2
    (tmp_path / "vocab.json").write_text(json.dumps({"a": 0, "Ġ": 1, "Ċ": 2, "ĊĊ": 3, "ĠĊ": 4}))
    (tmp_path / "merges.txt").write_text("#version: 0.2\nĊ Ċ\nĠ Ċ\n", encoding="utf-8")
    gpt2 = ChessTokenizer.from_directory(tmp_path)
    assert gpt2.encode("a\n\n") == [0, 3] and gpt2.encode("a \n") == [0, 4]
    assert set(gpt2.stop_ids) == {gpt2.eos_id, 2, 3}  # " \n" is not newlines only

    completion_ids = torch.tensor([[0, 3, 0], [0, 4, 0]])
    mask = torch.tensor([[True, True, False], [True, True, True]])
    generation = Generation.assemble(torch.tensor([[0], [0]]), torch.ones(2, 1, dtype=torch.bool),
                                     completion_ids, mask, torch.zeros(2, 3))
    rollout = Rollout(problems=[], generation=generation)
    assert stopped(gpt2, rollout.generation).tolist() == [True, False]  # ended by "\n\n"; cut at the cap
    assert decode_completions(gpt2, rollout) == ["a", "a \na"]


def test_prompt_broadcast_equals_the_concatenation_it_replaces_and_its_gradient_checks():
    from rookworld.model.gpt2 import PromptBroadcast
    U, G, P, N, W = 3, 4, 5, 6, 8
    prompts = torch.randn(U, P, W, dtype=torch.float64, requires_grad=True)
    completions = torch.randn(U * G, N, W, dtype=torch.float64, requires_grad=True)
    expected = torch.cat([prompts[:, None].expand(U, G, P, W).reshape(U * G, P, W), completions], dim=1)
    assert torch.equal(PromptBroadcast.apply(prompts, completions, G), expected)
    assert torch.autograd.gradcheck(lambda p, c: PromptBroadcast.apply(p, c, G), (prompts, completions))
