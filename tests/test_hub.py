"""Loading and saving: one-line errors, the tiny model entry point, exact round trips."""

import os
import subprocess
import sys
import textwrap

import pytest
import safetensors.torch
import torch

from rookworld.model.hub import ModelLoadError, create_tiny, load_model, load_pretrained, save_pretrained

REPO = "jrahn/RookWorld-LM-124M"


def assert_one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


def test_offline_and_not_cached_names_repo_and_model_path(tmp_path):
    script = textwrap.dedent(f"""
        from rookworld.model.hub import ModelLoadError, load_model
        try:
            load_model(source="{REPO}")
        except ModelLoadError as error:
            print(error)
        else:
            raise SystemExit("no error")
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    message = result.stdout.strip()
    assert len(message.splitlines()) == 1
    assert REPO in message and "model.path" in message and f"hf download {REPO}" in message


@pytest.mark.parametrize("missing", ["model.safetensors", "config.json"])
def test_folder_without_a_file_names_the_file(tiny_model_copy, missing):
    (tiny_model_copy / missing).unlink()
    with pytest.raises(ModelLoadError) as error:
        load_pretrained(str(tiny_model_copy))
    assert str(tiny_model_copy / missing) in assert_one_line(error)


def rewrite_tensors(directory, change) -> None:
    tensors = safetensors.torch.load_file(str(directory / "model.safetensors"))
    change(tensors)
    safetensors.torch.save_file(tensors, str(directory / "model.safetensors"))


def test_wrong_shape_names_tensor_and_both_shapes(tiny_model_copy):
    name = "transformer.h.1.mlp.c_fc.weight"  # Conv1D layout on disk: [64, 256]
    rewrite_tensors(tiny_model_copy, lambda t: t.update({name: torch.zeros(64, 128)}))
    with pytest.raises(ModelLoadError) as error:
        load_pretrained(str(tiny_model_copy))
    message = assert_one_line(error)
    assert name in message and "[64, 128]" in message and "[64, 256]" in message


def test_missing_tensor_is_named(tiny_model_copy):
    rewrite_tensors(tiny_model_copy, lambda t: t.pop("transformer.h.0.ln_2.bias"))
    with pytest.raises(ModelLoadError) as error:
        load_pretrained(str(tiny_model_copy))
    assert "transformer.h.0.ln_2.bias" in assert_one_line(error)


def test_missing_local_folder_and_bad_settings(tmp_path):
    for call in (lambda: load_model(path=str(tmp_path / "nope")),
                 lambda: load_pretrained(str(tmp_path / "nope")),
                 lambda: load_model(),
                 lambda: load_model(tiny={"n_layers": 3}),
                 lambda: load_model(tiny={}, dtype="float8")):
        with pytest.raises(ModelLoadError) as error:
            call()
        assert_one_line(error)


def test_save_load_round_trip_is_exact(tmp_path, tiny_model):
    model, tokenizer = tiny_model
    save_pretrained(model, tokenizer, tmp_path)
    loaded, loaded_tokenizer = load_pretrained(str(tmp_path))
    assert loaded.config == model.config
    assert loaded_tokenizer.tokenizer.to_str() == tokenizer.tokenizer.to_str()
    for (name, ours), (their_name, theirs) in zip(loaded.state_dict().items(), model.state_dict().items(),
                                                  strict=True):
        assert name == their_name and torch.equal(ours, theirs), name


def test_create_tiny_is_seeded(tmp_path):
    first = safetensors.torch.load_file(str(create_tiny(tmp_path / "a", seed=3) / "model.safetensors"))
    again = safetensors.torch.load_file(str(create_tiny(tmp_path / "b", seed=3) / "model.safetensors"))
    other = safetensors.torch.load_file(str(create_tiny(tmp_path / "c", seed=4) / "model.safetensors"))
    assert all(torch.equal(first[name], again[name]) for name in first)
    assert not torch.equal(first["transformer.wte.weight"], other["transformer.wte.weight"])


def test_load_model_prefers_path_then_tiny(tmp_path, tiny_model_dir):
    from_tiny, tokenizer = load_model(tiny={"seed": 0, "n_layer": 2, "n_head": 2, "n_embd": 64},
                                      dtype="bf16")
    assert from_tiny.wte.weight.dtype == torch.bfloat16
    assert tokenizer.vocab_size == from_tiny.config.vocab_size
    from_dir, _ = load_pretrained(str(tiny_model_dir))
    assert torch.equal(from_tiny.wte.weight, from_dir.wte.weight.bfloat16())
    create_tiny(tmp_path, seed=5, n_layer=1)
    from_path, _ = load_model(source=REPO, path=str(tmp_path), tiny={"seed": 0})
    assert from_path.config.n_layer == 1


def test_random_model_with_a_bigger_vocabulary_than_the_tokenizer(tmp_path):
    """model=gpt2_124m_random's path: the chess tokenizer on GPT-2's vocabulary size (here a small shape)."""
    from omegaconf import OmegaConf

    real = OmegaConf.load(os.path.join(os.path.dirname(__file__), "..", "conf", "model", "gpt2_124m_random.yaml"))
    assert (real.tiny.n_layer, real.tiny.n_head, real.tiny.n_embd, real.tiny.vocab_size) == (12, 12, 768, 50257)
    model, tokenizer = load_model(tiny={"n_layer": 1, "n_head": 2, "n_embd": 32, "vocab_size": 4096})
    assert model.config.vocab_size == 4096 and tokenizer.vocab_size < 4096
    with pytest.raises(ModelLoadError, match="model.tiny.vocab_size=10: must be at least"):
        create_tiny(tmp_path, vocab_size=10)


def test_sharded_save_keeps_every_file_under_the_limit_and_loads_exactly(tmp_path, tiny_model):
    from transformers import GPT2LMHeadModel

    model, tokenizer = tiny_model
    limit = 600_000  # bytes: above the largest tensor (the embedding), below the whole model
    save_pretrained(model, tokenizer, tmp_path, max_shard_mib=limit / 2**20)
    shards = sorted(tmp_path.glob("model-*-of-*.safetensors"))
    assert len(shards) >= 2 and not (tmp_path / "model.safetensors").exists()
    assert all(path.stat().st_size <= limit + 4096 for path in shards)  # + the safetensors header
    loaded, _ = load_pretrained(str(tmp_path))
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    hf = GPT2LMHeadModel.from_pretrained(tmp_path)  # the hub's own reader takes the same folder
    assert torch.equal(hf.transformer.wte.weight, model.state_dict()["wte.weight"])
    save_pretrained(model, tokenizer, tmp_path)  # saved again whole: no stale shard or index remains
    assert sorted(p.name for p in tmp_path.glob("model*")) == ["model.safetensors"]


def test_a_missing_shard_is_named(tmp_path, tiny_model):
    model, tokenizer = tiny_model
    save_pretrained(model, tokenizer, tmp_path, max_shard_mib=600_000 / 2**20)
    first = sorted(tmp_path.glob("model-*-of-*.safetensors"))[0]
    first.unlink()
    with pytest.raises(ModelLoadError) as error:
        load_pretrained(str(tmp_path))
    assert first.name in assert_one_line(error) and "model.safetensors.index.json" in str(error.value)
