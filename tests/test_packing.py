"""Packed rows (sft.pack): the same documents give the same loss and gradients packed as unpacked."""
import itertools

import pytest
import torch

from rookworld.data.documents import ArbiterCases, TaskDocuments, collate
from rookworld.data.packing import (PADDING_SEGMENT, batch_documents, collate_rows, document_tokens,
                                    pack_documents, pack_rows)
from rookworld.data.positions import load_policy_problems
from rookworld.sft.update import lm_loss

CASES = {"normal": 4.0, "checkmate": 1.0, "illegal": 1.0, "promotion": 1.0, "castling": 0.5}
SEQ_LEN = 320
ROW = 1024  # a long row: the fill test's


def documents(tokenizer, n: int, loss_on: str = "document", seed: int = 0):
    stream = TaskDocuments(tokenizer, load_policy_problems("train")[:50], ArbiterCases(CASES, set()), 0.5,
                           SEQ_LEN, seed=seed, loss_on=loss_on)
    return list(itertools.islice(iter(stream), n))


def loss_and_grads(model, batch):
    model.zero_grad(set_to_none=True)
    loss = lm_loss(model, *batch)
    loss.backward()
    return loss.item(), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("loss_on", ["document", "completion"])
def test_packed_loss_and_gradients_equal_the_unpacked_ones(tiny_model, tiny_tokenizer, loss_on):
    model, _ = tiny_model
    docs = documents(tiny_tokenizer, 24, loss_on)
    rows = pack_documents(docs, SEQ_LEN)
    assert sorted(map(id, itertools.chain(*rows))) == sorted(map(id, docs)) and len(rows) < len(docs) / 2
    packed = collate_rows(rows, SEQ_LEN, tiny_tokenizer.pad_id)
    unpacked_loss, unpacked_grads = loss_and_grads(model, collate(docs, tiny_tokenizer.pad_id))
    packed_loss, packed_grads = loss_and_grads(model, packed)
    print(f"loss unpacked {unpacked_loss:.7f} packed {packed_loss:.7f} ({len(docs)} documents in {len(rows)} rows)")
    assert abs(packed_loss - unpacked_loss) < 1e-5
    for name, grad in unpacked_grads.items():
        torch.testing.assert_close(packed_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)
    assert batch_documents(packed) == len(docs)


def test_flex_attention_gives_the_sdpa_document_mask_loss(tiny_model, tiny_tokenizer):
    model, _ = tiny_model
    packed = collate_rows(pack_documents(documents(tiny_tokenizer, 8), SEQ_LEN), SEQ_LEN, tiny_tokenizer.pad_id)
    with torch.no_grad():
        sdpa = lm_loss(model, *packed).item()
        model.packed_attention = "flex"
        flex = lm_loss(model, *packed).item()
    assert abs(flex - sdpa) < 1e-5, (flex, sdpa)


def test_streamed_rows_are_full_and_keep_every_document_whole(tiny_tokenizer):
    """Documents are 70-165 tokens: rows of 320 hold two (~87% full), rows of 1,024 seven or eight."""
    docs = documents(tiny_tokenizer, 900, seed=1)
    rows = list(itertools.islice(pack_rows(iter(docs), ROW, window=64), 100))
    placed = [doc for row in rows for doc in row]
    assert len({id(doc) for doc in placed}) == len(placed)  # none placed twice
    used = [sum(map(document_tokens, row)) for row in rows]
    assert max(used) <= ROW
    fill = sum(used) / (ROW * len(rows))
    print(f"packed rows are {fill:.1%} full ({len(placed)} documents in {len(rows)} rows of {ROW})")
    assert fill > 0.95
    inputs, targets, positions, segments = collate_rows(rows[:4], ROW, tiny_tokenizer.pad_id)
    first = rows[0][0][0]
    assert inputs[0, :len(first) - 1].tolist() == first[:-1] and targets[0, :len(first) - 1].tolist() == first[1:]
    assert positions[0, len(first) - 1] == 0 and segments[0, len(first) - 1] == 1
    assert ((segments == PADDING_SEGMENT) == (targets == -100)).all()  # loss_on=document: all but padding trained


def test_a_document_longer_than_a_row_is_refused(tiny_tokenizer):
    with pytest.raises(ValueError, match="does not fit a row of sft.seq_len=50"):
        pack_documents(documents(tiny_tokenizer, 2), 50)


def test_flex_attention_and_compile_are_refused_on_the_cpu_in_one_line():
    from hydra import compose, initialize_config_dir
    from train_helpers import CONF_DIR

    from rookworld.app.config import load_sft
    from rookworld.specs.rules import ConfigError
    from rookworld.sft.update import check_cuda_knobs

    for override, message in (("sft.pack_attention=flex", "flex trains on a CUDA device only"),
                              ("sft.compile=true", "needs a CUDA device")):
        with initialize_config_dir(config_dir=CONF_DIR):
            spec = load_sft(compose("sft", overrides=["sft.pack=true", override]))
        with pytest.raises(ConfigError, match=message):
            check_cuda_knobs(spec.sft, torch.device("cpu"))


def test_a_packed_run_trains_on_rows_from_a_document_worker_and_counts_its_documents(tmp_path):
    """`python -m rookworld.sft sft.pack=true` with one DataLoader worker: 2 steps of 2 rows of 320 tokens."""
    import json
    import os
    import subprocess
    import sys

    command = [sys.executable, "-m", "rookworld.sft", "device=cpu", "tracking=none", "sft.pack=true", "sft.steps=2",
               "sft.batch_size=2", "sft.seq_len=320", "sft.num_workers=1", "sft.arbiter_docs_per_position=2",
               "sft.eval_every=0", "sft.log_every=1", "sft.heldout_docs=4", "eval.num_policy=2", "eval.num_arbiter=2",
               f"hydra.run.dir={tmp_path}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "step 2/2 |" in done.stdout
    metrics = json.loads((tmp_path / "model" / "sft_metrics.json").read_text())
    assert metrics["sft/steps"] == 2 and 2 * 2 * 2 <= metrics["sft/documents"] <= 2 * 2 * 4  # 2-4 documents a row


def test_the_packed_forward_traces_under_torch_compile_with_flex_s_mask_built_outside(tiny_model, tiny_tokenizer):
    """sft.compile's path through dynamo (the eager backend: tracing without a compiler): the same loss,
    flex's block mask built eagerly at a graph break (create_block_mask cannot be traced)."""
    model, _ = tiny_model
    packed = collate_rows(pack_documents(documents(tiny_tokenizer, 8), SEQ_LEN), SEQ_LEN, tiny_tokenizer.pad_id)
    with torch.no_grad():
        plain = lm_loss(model, *packed).item()
        for kind in ("sdpa", "flex"):
            model.packed_attention = kind
            compiled = lm_loss(torch.compile(model, backend="eager", dynamic=False), *packed).item()
            assert abs(compiled - plain) < 1e-5, (kind, compiled, plain)
