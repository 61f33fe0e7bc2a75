"""Load and save GPT-2 checkpoints in the Hugging Face hub format, and the one model entry point.

A model folder holds `config.json` (GPT-2 keys), `model.safetensors` (GPT-2 names, with or without the
`transformer.` prefix; Conv1D layout, i.e. linear weights stored [in, out]), or the hub's sharded form of it
(`model-0000i-of-0000n.safetensors` files and `model.safetensors.index.json`), and the tokenizer
(`tokenizer.json`, or `vocab.json` + `merges.txt`). Dropout settings in config.json are ignored: the
model has no dropout. `lm_head.weight` is optional (tied to `wte`); `attn.bias` buffers are ignored.

Entry point for the configuration layer (conf/model/*.yaml):

    load_model(source=None, path=None, revision=None, device="cpu", dtype="float32", tiny=None)
        -> (GPT, ChessTokenizer)

    - `path`: a local model folder (e.g. from `hf download REPO --local-dir DIR`); wins if set.
    - `tiny`: a dict of `create_tiny` settings (seed, n_layer, n_head, n_embd, n_positions): a
      random-init GPT-2 with the tiny tokenizer, saved and loaded through the same code path as a
      real checkpoint. Used when `path` is unset.
    - `source`: a hub repo id (e.g. `jrahn/RookWorld-LM-124M`, at `revision`) or a local folder.

Every failure raises `ModelLoadError` with a one-line message.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path

import safetensors.torch
import torch

from rookworld.model.gpt2 import GPT, GPTConfig
from rookworld.model.load_error import ModelLoadError  # raised here; callers import it from here too
from rookworld.model.tokenizer import ChessTokenizer

CONV1D_WEIGHTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
IGNORED_BUFFERS = (".attn.bias", ".attn.masked_bias")  # causal-mask buffers of old exports
TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh")
WEIGHTS, WEIGHTS_INDEX = "model.safetensors", "model.safetensors.index.json"  # one file, or the index of shards
HUB_FILES = ["config.json", WEIGHTS, WEIGHTS_INDEX, "model-*-of-*.safetensors", "tokenizer.json", "vocab.json",
             "merges.txt"]
DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
          "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


def load_model(source: str | None = None, path: str | Path | None = None, revision: str | None = None,
               device: str | torch.device = "cpu", dtype: str | torch.dtype = "float32",
               tiny: Mapping | None = None) -> tuple[GPT, ChessTokenizer]:
    """The single entry point: a local folder (`path`), else a tiny random model, else `source`."""
    dtype = resolve_dtype(dtype)
    if path is not None:
        if not Path(path).expanduser().is_dir():
            raise ModelLoadError(f"model.path {path} is not a folder")
        return load_pretrained(str(path), device=device, dtype=dtype)
    if tiny is not None:
        with tempfile.TemporaryDirectory(prefix="rookworld-tiny-") as directory:
            try:
                create_tiny(directory, **dict(tiny))
            except TypeError as error:
                raise ModelLoadError(f"bad tiny model settings {dict(tiny)}: {error}") from error
            return load_pretrained(directory, device=device, dtype=dtype)
    if source is None:
        raise ModelLoadError("no model given: set model.source (hub id), model.path or model.tiny")
    return load_pretrained(source, revision=revision, device=device, dtype=dtype)


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ModelLoadError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    return DTYPES[dtype]


def load_pretrained(source: str, revision: str | None = None, device: str | torch.device = "cpu",
                    dtype: torch.dtype = torch.float32) -> tuple[GPT, ChessTokenizer]:
    """Load a GPT-2 checkpoint from a hub repo id or a local folder; the model is in eval mode."""
    directory = resolve_directory(source, revision)
    config = read_config(directory / "config.json")
    state = read_weights(directory, config, device, dtype)
    model = GPT.on_meta(config)
    model.load_state_dict(state, assign=True)
    tokenizer = read_tokenizer(directory)
    if tokenizer.vocab_size > config.vocab_size:
        raise ModelLoadError(
            f"tokenizer in {directory} has {tokenizer.vocab_size} tokens but the model only {config.vocab_size}")
    return model.eval(), tokenizer


def resolve_directory(source: str, revision: str | None) -> Path:
    local = Path(source).expanduser()
    if local.is_dir():
        return local
    if source.startswith(("/", ".", "~")) or source.count("/") > 1:
        raise ModelLoadError(f"model folder {source} does not exist")
    return download(source, revision)


def download(repo_id: str, revision: str | None) -> Path:
    from huggingface_hub import snapshot_download  # reads HF_HUB_OFFLINE at import

    try:
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=HUB_FILES))
    except Exception as error:  # offline, not cached, unreachable, unknown repo or revision: all the same fix
        at_revision = f" --revision {revision}" if revision else ""
        raise ModelLoadError(
            f"cannot get {repo_id} from the Hugging Face hub ({type(error).__name__}: offline, not cached, "
            f"or not found); download it on a machine with network "
            f"(`hf download {repo_id}{at_revision} --local-dir DIR`) and pass model.path=DIR") from error


def read_config(path: Path) -> GPTConfig:
    if not path.is_file():
        raise ModelLoadError(f"{path} not found: a model folder needs config.json")
    raw = json.loads(path.read_text())
    activation = raw.get("activation_function", "gelu_new")
    if activation not in TANH_GELUS:
        raise ModelLoadError(f"{path}: activation_function {activation!r} is not GPT-2's tanh GELU")
    if raw.get("scale_attn_by_inverse_layer_idx") or raw.get("n_inner") not in (None, 4 * raw.get("n_embd", 0)):
        raise ModelLoadError(f"{path}: scale_attn_by_inverse_layer_idx / n_inner variants are not supported")
    try:
        return GPTConfig(vocab_size=raw["vocab_size"], n_positions=raw.get("n_positions") or raw["n_ctx"],
                         n_embd=raw["n_embd"], n_layer=raw["n_layer"], n_head=raw["n_head"],
                         layer_norm_epsilon=raw.get("layer_norm_epsilon", 1e-5))
    except KeyError as error:
        raise ModelLoadError(f"{path} lacks the GPT-2 key {error}") from error
    except ValueError as error:
        raise ModelLoadError(f"{path}: {error}") from error


def read_hub_tensors(directory: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """The tensors of a model folder's model.safetensors, or of every shard its index lists; and the path
    that names them in errors."""
    index = directory / WEIGHTS_INDEX
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, AttributeError) as error:
            raise ModelLoadError(f"{index}: not a weight index ({type(error).__name__}: {error})") from None
        raw = {}
        for shard in shards:
            if not (directory / shard).is_file():
                raise ModelLoadError(f"{directory / shard} not found: {index} lists it")
            raw.update(safetensors.torch.load_file(str(directory / shard)))
        return raw, index
    path = directory / WEIGHTS
    if not path.is_file():
        raise ModelLoadError(f"{path} not found: a model folder needs {WEIGHTS} (or {WEIGHTS_INDEX} and its shards)")
    return safetensors.torch.load_file(str(path)), path


def read_weights(directory: Path, config: GPTConfig, device: str | torch.device, dtype: torch.dtype) -> dict:
    """Hub tensors -> GPT state dict (our names and [out, in] layout), checked against `config`."""
    expected = {name: tuple(t.shape) for name, t in GPT.on_meta(config).state_dict().items()}
    raw, path = read_hub_tensors(directory)
    state = {}
    for file_name, tensor in raw.items():
        name = file_name.removeprefix("transformer.")
        if name == "lm_head.weight" or name.endswith(IGNORED_BUFFERS):
            continue
        if name not in expected:
            raise ModelLoadError(f"unexpected tensor {file_name} in {path}")
        file_shape = expected[name][::-1] if name.endswith(CONV1D_WEIGHTS) else expected[name]
        if tuple(tensor.shape) != file_shape:
            raise ModelLoadError(f"tensor {file_name} in {path} has shape {list(tensor.shape)}, "
                                 f"expected {list(file_shape)} from config.json")
        if name.endswith(CONV1D_WEIGHTS):
            tensor = tensor.t()
        state[name] = tensor.to(device=device, dtype=dtype).contiguous()
    missing = sorted(expected.keys() - state.keys())
    if missing:
        raise ModelLoadError(f"tensor transformer.{missing[0]} missing from {path} ({len(missing)} missing)")
    lm_head = raw.get("lm_head.weight")
    if lm_head is not None and not torch.equal(lm_head.to(dtype), state["wte.weight"].cpu()):
        raise ModelLoadError(f"lm_head.weight in {path} differs from wte: untied output layers are not supported")
    return state


def read_tokenizer(directory: Path) -> ChessTokenizer:
    try:
        return ChessTokenizer.from_directory(directory)
    except Exception as error:  # missing files, malformed json, no eos / newline token
        raise ModelLoadError(f"cannot read the tokenizer in {directory}: {error}") from error


def save_pretrained(model: GPT, tokenizer: ChessTokenizer, directory: str | Path,
                    max_shard_mib: float | None = None, dtype: torch.dtype | None = None) -> None:
    """Write config.json, model.safetensors (Conv1D layout, `transformer.` names) and tokenizer.json;
    the folder loads with `load_pretrained` and with `transformers.GPT2LMHeadModel.from_pretrained`.
    With `max_shard_mib`, weights larger than that many MiB go into the hub's shards of at most that size each
    (model-0000i-of-0000n.safetensors and model.safetensors.index.json), e.g. to fit a file-size limit.
    With `dtype`, the weights are written in that dtype (the model itself is not changed)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = model.config
    hf_config = {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": config.vocab_size,
        "n_positions": config.n_positions,
        "n_embd": config.n_embd,
        "n_layer": config.n_layer,
        "n_head": config.n_head,
        "layer_norm_epsilon": config.layer_norm_epsilon,
        "activation_function": "gelu_new",
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "tie_word_embeddings": True,
        "bos_token_id": tokenizer.eos_id,
        "eos_token_id": tokenizer.eos_id,
        "dtype": str(dtype or model.wte.weight.dtype).removeprefix("torch."),
    }
    (directory / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
    tensors = {}
    for name, tensor in model.state_dict().items():
        if name.endswith(CONV1D_WEIGHTS):
            tensor = tensor.t()
        tensors[f"transformer.{name}"] = tensor.detach().to(device="cpu", dtype=dtype or tensor.dtype).contiguous()
    for stale in [directory / WEIGHTS, directory / WEIGHTS_INDEX, *directory.glob("model-*-of-*.safetensors")]:
        stale.unlink(missing_ok=True)  # an earlier save's weights never mix with these
    if max_shard_mib is None:
        safetensors.torch.save_file(tensors, str(directory / WEIGHTS), metadata={"format": "pt"})
    else:
        from huggingface_hub import save_torch_state_dict  # the hub's own shard layout and index
        save_torch_state_dict(tensors, directory, max_shard_size=int(max_shard_mib * 2**20), metadata={"format": "pt"})
    tokenizer.save(directory)


def create_tiny(directory: str | Path, seed: int = 0, n_layer: int = 2, n_head: int = 2, n_embd: int = 64,
                n_positions: int = 512, vocab_size: int | None = None) -> Path:
    """Write a random-init (GPT-2 init, seeded) model with the tiny tokenizer into `directory`.
    `vocab_size`: the tokenizer's (None) or larger, e.g. GPT-2's 50257 for real shapes (the tiny
    tokenizer's ids are valid ids of any bigger vocabulary)."""
    tokenizer = ChessTokenizer.tiny()
    vocab_size = tokenizer.vocab_size if vocab_size is None else vocab_size
    if vocab_size < tokenizer.vocab_size:
        raise ModelLoadError(f"model.tiny.vocab_size={vocab_size}: must be at least the tiny tokenizer's "
                             f"{tokenizer.vocab_size}")
    config = GPTConfig(vocab_size=vocab_size, n_positions=n_positions, n_embd=n_embd,
                       n_layer=n_layer, n_head=n_head)
    model = GPT(config)
    model.init_weights(torch.Generator().manual_seed(seed))
    save_pretrained(model, tokenizer, directory)
    return Path(directory)
