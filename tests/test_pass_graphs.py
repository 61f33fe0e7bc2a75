"""The CUDA-graph path of the training passes (rookworld/model/pass_graphs.py).

What the graphs need from the rest of the trainer is checked on the CPU with the real tiny model:
padding a batch to the graphs' bucketed widths changes no real token's log-prob, the loss or the
gradient. Capture and replay themselves need a GPU (the CUDA test below, and the benchmark's
self-check `graphed_update`, which compares replayed and eager losses and gradients).
"""
import pytest
import torch

from rookworld.bench.checks import compare_graphed_update
from rookworld.run.build import build_run
from rookworld.app.config import load_run
from rookworld.grpo.loss import LossNormalizer
from rookworld.model.pass_graphs import pad_rows
from rookworld.judge.rollout import generate_for_problems
from rookworld.tracking import make_tracker
from train_helpers import tiny_config


def trainer_and_batch(tmp_path, *overrides):
    cfg = tiny_config(tmp_path, "task_mix=mixed", "kl=fixed", "kl.coef=0.1", *overrides)
    trainer = build_run(load_run(cfg), make_tracker(cfg))
    rows = trainer.sample_rows()
    gen = generate_for_problems(trainer.decoder, trainer.tokenizer, rows, trainer.max_new_tokens,
                                generator=trainer.generator).generation
    advantages = torch.linspace(-1, 1, len(rows))
    with torch.no_grad():
        batch = trainer.learner.make_batch(gen, advantages)
    batch.ref_logp = batch.ref_logp - 0.05  # a reference that differs, so the KL term has a gradient
    return trainer, batch


def loss_and_gradient(trainer, batch, bucket: int | None):
    normalizer = LossNormalizer.for_batch(trainer.settings.grpo.loss_type, batch.mask, 60)
    everything = torch.arange(batch.mask.shape[0])
    inputs, static = trainer.learner.pass_inputs(batch.rows(everything), normalizer, 0.1, batch.broadcast_width(everything))
    if bucket:
        inputs = pad_rows(inputs, bucket)
    trainer.policy.zero_grad(set_to_none=True)
    out = trainer.learner.loss_and_backward(inputs, **static)
    grad = torch.cat([p.grad.flatten() for p in trainer.policy.parameters()])
    return out, grad


@pytest.mark.parametrize("bucket, knobs", [
    (16, []), (7, []),
    (16, ["grpo.sampler_correction.mode=token_truncate", "grpo.sampler_correction.cap=1.01"]),
    (16, ["grpo.top_entropy_quantile=0.3", "grpo.entropy.coef=0.01"]),
])
def test_padding_to_the_graph_buckets_changes_no_loss_log_prob_or_gradient(tmp_path, bucket, knobs):
    """What the CUDA graphs replay (rows padded to the buckets) equals the unpadded pass, with the knobs
    that read per-token tensors too."""
    trainer, batch = trainer_and_batch(tmp_path, *knobs)
    batch.sampler_logp = batch.sampler_logp + 0.01  # a sampler that differs a little: correction weights != 1
    width = batch.mask.shape[1]
    assert batch.prompt_ids.shape[1] % bucket or width % bucket  # the test pads something
    plain, plain_grad = loss_and_gradient(trainer, batch, None)
    padded, padded_grad = loss_and_gradient(trainer, batch, bucket)
    assert padded["logp"].shape[1] == width + (-width % bucket)
    real = batch.mask.bool()
    torch.testing.assert_close(padded["logp"][:, :width][real], plain["logp"][real], rtol=0, atol=1e-5)
    torch.testing.assert_close(padded["loss"], plain["loss"], rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(padded_grad, plain_grad, rtol=1e-4, atol=1e-6)
    for stat in ("clip_low", "clip_high", "clip_region"):
        assert padded[stat] == plain[stat]


def test_pad_rows_masks_the_padding():
    rows = {"prompt_ids": torch.ones(1, 2, dtype=torch.long), "prompt_mask": torch.ones(1, 2, dtype=torch.bool),
            "prompt_positions": torch.arange(2)[None], "group": torch.zeros(2, dtype=torch.long),
            "completion_ids": torch.ones(2, 3, dtype=torch.long), "completion_positions": torch.arange(2, 5).expand(2, 3),
            "mask": torch.ones(2, 3), "advantages": torch.ones(2)}
    padded = pad_rows(rows, bucket=4)  # prompt 2 -> 4 on the left, completion 3 -> 4 on the right
    assert padded["prompt_mask"][0].tolist() == [False, False, True, True]
    assert padded["prompt_positions"][0].tolist() == [0, 0, 0, 1]
    assert padded["mask"][0].tolist() == [1, 1, 1, 0] and padded["completion_ids"].shape == (2, 4)
    assert torch.equal(padded["advantages"], rows["advantages"]) and torch.equal(padded["group"], rows["group"])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_replayed_update_equals_the_eager_one_and_recaptures_when_grads_move(tmp_path):
    trainer, batch = trainer_and_batch(tmp_path, "device=cuda")
    gen = generate_for_problems(trainer.decoder, trainer.tokenizer, trainer.sample_rows(), trainer.max_new_tokens,
                                generator=trainer.generator).generation
    check = compare_graphed_update(trainer, gen)
    assert check["ok"] and check["captured"] == 1 and check["replays_same_loss"], check
    trainer.policy.zero_grad(set_to_none=True)  # gradients moved: the graphs must be captured anew
    again = compare_graphed_update(trainer, gen)
    assert again["ok"] and again["captured"] == 1, again


def test_the_broadcast_width_is_found_only_for_whole_groups_in_order(tmp_path):
    trainer, batch = trainer_and_batch(tmp_path)  # 2 prompts x 3 rows
    assert batch.groups == [0, 0, 0, 1, 1, 1] and batch.prompt_ids.shape[0] == 2
    assert batch.broadcast_width(torch.arange(6)) == 3
    assert batch.broadcast_width(torch.tensor([3, 4, 5])) == 3           # one whole group
    assert batch.broadcast_width(torch.tensor([0, 3, 1, 4, 2, 5])) == 0  # shuffled rows
    assert batch.broadcast_width(torch.tensor([0, 1, 3])) == 0           # uneven groups
    assert batch.rows(torch.tensor([3, 4]))["prompt_ids"].shape[0] == 1
