"""Supervised warm-start (rookworld.sft) and the shipped rookworld_tiny checkpoint, on the CPU."""
import os
import random
import signal
import subprocess
import sys

import pytest
import torch
from sweep_helpers import descendants

from rookworld.app.config import ASSETS_DIR
from rookworld.data.positions import load_arbiter_problems, load_policy_problems
from rookworld.judge.evaluate import evaluate
from rookworld.model.hub import load_model
from rookworld.model.sampling import PlainDecoder
from rookworld.judge.rewards import GraduatedReward
from rookworld.tasks import perfect_completion
from rookworld.data.documents import IGNORE, ArbiterCases, TaskDocuments, collate, encode_document
from rookworld.sft.update import lm_loss

CASES = {"normal": 4.0, "checkmate": 1.0, "illegal": 1.0, "promotion": 1.0}
FORMAT_THRESHOLD = 0.8   # share of format-valid A: completions the shipped checkpoint must reach


def test_document_stream_is_seeded_and_in_the_task_formats(tiny_tokenizer):
    problems = load_policy_problems("train")[:50]
    stream = TaskDocuments(tiny_tokenizer, problems, ArbiterCases(CASES, set()), 0.5, 320, seed=3, loss_on="document")
    docs = [next(it) for it in [iter(stream)] for _ in range(20)]
    again = [next(it) for it in [iter(stream)] for _ in range(20)]
    assert docs == again
    assert {first_target for _, first_target in docs} == {0}
    texts = [tiny_tokenizer.decode(ids) for ids, _ in docs]
    assert all(ids[0] == tiny_tokenizer.eos_id and ids[-1] == tiny_tokenizer.newline_id for ids, _ in docs)
    assert {t.strip()[:2] for t in texts} == {"P:", "A:"}
    arbiter = [t for t in texts if t.strip().startswith("A:")]
    assert all(t.count("+") == 6 for t in arbiter)


def test_completion_loss_trains_on_the_completion_and_its_newline_only(tiny_tokenizer):
    policy = load_policy_problems("train")[0]
    arbiter = load_arbiter_problems("validation")[0]
    for problem in (policy, arbiter):
        completion = perfect_completion(problem)
        whole = encode_document(tiny_tokenizer, problem.prompt_text, completion, 320, "document")
        ids, first_target = encode_document(tiny_tokenizer, problem.prompt_text, completion, 320, "completion")
        assert ids == whole[0] and whole[1] == 0
        _, targets = collate([(ids, first_target)], tiny_tokenizer.pad_id)
        trained = targets[0][targets[0] != IGNORE].tolist()
        assert (targets[0, :first_target] == IGNORE).all()
        assert tiny_tokenizer.decode(trained).strip() == completion.strip() and trained[-1] == tiny_tokenizer.newline_id
        assert tiny_tokenizer.decode(ids[1:first_target + 1]).strip() == problem.prompt_text


def test_a_few_sft_steps_reduce_the_loss_on_a_fixed_batch(tiny_model, tiny_tokenizer):
    model, _ = tiny_model
    model.train()
    stream = iter(TaskDocuments(tiny_tokenizer, load_policy_problems("train")[:20],
                                ArbiterCases(CASES, set()), 0.5, 200, seed=0, loss_on="document"))
    inputs, targets = collate([next(stream) for _ in range(8)], tiny_tokenizer.pad_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(8):
        loss = lm_loss(model, inputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


def test_shipped_checkpoint_produces_format_valid_arbiter_completions():
    model, tokenizer = load_model(source=str(ASSETS_DIR / "rookworld_tiny"))
    assert sum(p.numel() for p in model.parameters()) > 10e6
    sample = random.Random(0).sample(load_arbiter_problems("validation"), 32)
    result = evaluate(PlainDecoder(model), tokenizer, sample, GraduatedReward(), {"P": 112, "A": 64}, 32, 0,
                      score="graduated")
    rate = result.metrics["eval/A/format"]
    print(f"rookworld_tiny A: format-valid rate on 32 held-out transitions: {rate:.3f}")
    assert rate >= FORMAT_THRESHOLD


def sft_config(*overrides: str):
    from hydra import compose, initialize_config_dir
    from train_helpers import CONF_DIR
    with initialize_config_dir(config_dir=CONF_DIR):
        return compose("sft", overrides=list(overrides))


def test_the_sft_optimizer_is_a_group_choice_sgd_included():
    """`python -m rookworld.sft optimizer=sgd` builds SGD (the pre-training AdamW settings are an option of
    the optimizer group, not keys on top of whichever optimizer is chosen); the default is unchanged."""
    from rookworld.app.config import load_sft

    default = load_sft(sft_config()).optimizer
    assert (default.name, default.lr, tuple(default.betas), default.weight_decay, default.warmup_steps,
            default.min_lr_ratio) == ("adamw", 3e-4, (0.9, 0.95), 0.1, 100, 0.1)
    sgd = load_sft(sft_config("optimizer=sgd", "optimizer.lr=0.01")).optimizer
    optimizer = sgd.build(torch.nn.Linear(2, 2).parameters())
    assert isinstance(optimizer, torch.optim.SGD) and optimizer.defaults["momentum"] == 0.9
    assert load_sft(sft_config("experiment=sft_rookworld_tiny")).optimizer.lr == 1.5e-3


def test_two_processes_under_torchrun_take_the_same_steps_and_save_one_model(tmp_path):
    """Data-parallel SFT on the CPU (gloo): rank 0 logs and saves; the run ends only if both processes'
    weights are identical after their steps (rookworld.sft.distributed.check_in_sync)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "rookworld.sft", "device=cpu", "tracking=none", "sft.steps=2", "sft.batch_size=4",
               "sft.seq_len=96", "sft.num_workers=0", "sft.eval_every=0", "sft.log_every=1", "sft.heldout_docs=4",
               "eval.num_policy=2", "eval.num_arbiter=2", f"hydra.run.dir={tmp_path}"]
    done = run_or_dump_stacks(command, timeout_s=150, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 processes of 2 documents a step" in done.stdout
    assert done.stdout.count("step 2/2 |") == 1  # rank 0 alone logs
    assert (tmp_path / "model" / "model.safetensors").is_file()


def test_the_step_benchmark_prints_the_stream_and_each_layout_per_batch_size(capsys):
    from rookworld.bench.sft_step import main
    main(["--batch-sizes", "2", "4", "--steps", "1", "--stream-docs", "20", "--repeats", "1", "model=tiny", "model.tiny.n_layer=1",
          "model.tiny.n_embd=32", "model.tiny.n_head=2", "device=cpu", "sft.seq_len=200", "sft.arbiter_docs_per_position=2"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("document stream: ") and "documents/s in one process" in lines[0]
    assert "2 a position: " in lines[0]
    assert [line.split()[1:3] for line in lines[1:]] == [["2", "unpacked"], ["2", "packed"], ["4", "unpacked"],
                                                         ["4", "packed"]]
    assert all("documents/s" in line and "real tokens/s" in line and "workers to feed it" in line for line in lines[1:])
    assert "x200]" in lines[2]  # packed rows of sft.seq_len


def run_or_dump_stacks(command: list[str], timeout_s: float, env: dict[str, str]):
    """The finished command; one still running after timeout_s gets SIGABRT in every process below it,
    so that Python's fault handler prints where each thread waits, and the test fails with those stacks."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**env, "PYTHONFAULTHANDLER": "1"})
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        for pid in sorted(descendants(process.pid)) + [process.pid]:
            try:
                os.kill(pid, signal.SIGABRT)
            except ProcessLookupError:
                pass
        out, err = process.communicate(timeout=30)
        raise AssertionError(f"still running after {timeout_s} s; stacks:\n{err[-6000:]}\n{out[-2000:]}")
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def test_a_seq_len_past_the_models_positions_is_refused_before_training():
    """A packed row may be longer than the model's context, a document not: documents are cut at sft.seq_len."""
    from rookworld.app.config import load_sft
    from rookworld.specs.rules import ConfigError
    from rookworld.sft.loop import load_trainable

    spec = load_sft(sft_config("model=tiny", "model.tiny.n_positions=256", "sft.pack=true", "sft.seq_len=320",
                               "device=cpu", "tracking=none"))
    with pytest.raises(ConfigError, match=r"^sft.seq_len=320: above the model's n_positions=256: "):
        load_trainable(spec, torch.device("cpu"))
