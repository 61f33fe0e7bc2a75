"""A batch's rows, in any subset and any order, are scored against their own prompts.

The update splits a step's rows into shuffled minibatches and micro-batches; each micro-batch carries
only its rows' distinct prompts (Batch.rows) and, when its rows are whole groups one after the other,
the shared-prompt fast path (Batch.broadcast_width > 0). Both read one layout (Batch.layout), so whatever
the order, each completion's log-probs must equal a plain forward of its own prompt + completion.
"""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from rookworld.model.gpt2 import GPT, GPTConfig
from rookworld.model.logprobs import completion_logprobs, token_logprobs
from rookworld.model.sampling import Generation
from rookworld.grpo.learner import Batch
from train_helpers import tiny_config

VOCAB, PROMPT_WIDTH, COMPLETION_WIDTH = 40, 6, 4
MODEL = GPT(GPTConfig(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=4)).double().eval()


@st.composite
def batches(draw):
    """A generation of `problems` (each a prompt index, repeated G times, problems may repeat) and a
    row subset of it in some order."""
    distinct = draw(st.integers(1, 4))
    group_size = draw(st.integers(1, 4))
    problems = draw(st.lists(st.integers(0, distinct - 1), min_size=1, max_size=5))
    lengths = draw(st.lists(st.integers(1, PROMPT_WIDTH), min_size=distinct, max_size=distinct))
    seed = draw(st.integers(0, 2**16))
    rows = len(problems) * group_size
    subset = draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=rows, unique=True))
    order = draw(st.sampled_from(["as drawn", "sorted", "reversed"]))
    if order != "as drawn":
        subset = sorted(subset, reverse=order == "reversed")
    generator = torch.Generator().manual_seed(seed)
    prompt_ids = torch.zeros(distinct, PROMPT_WIDTH, dtype=torch.long)
    prompt_mask = torch.zeros(distinct, PROMPT_WIDTH, dtype=torch.bool)
    for prompt, length in enumerate(lengths):  # left-padded; token `prompt + 1` first keeps prompts distinct
        prompt_ids[prompt, -length:] = torch.randint(1, VOCAB, (length,), generator=generator)
        prompt_ids[prompt, -length] = prompt + 1
        prompt_mask[prompt, -length:] = True
    row_prompt = torch.tensor([p for p in problems for _ in range(group_size)])
    completion_ids = torch.randint(1, VOCAB, (rows, COMPLETION_WIDTH), generator=generator)
    stops = torch.randint(1, COMPLETION_WIDTH + 1, (rows,), generator=generator)
    completion_mask = torch.arange(COMPLETION_WIDTH)[None] < stops[:, None]
    gen = Generation.assemble(prompt_ids[row_prompt], prompt_mask[row_prompt], completion_ids,
                              completion_mask, torch.zeros(rows, COMPLETION_WIDTH))
    return gen, torch.tensor(subset)


def own_prompt_logprobs(gen: Generation, index: torch.Tensor) -> torch.Tensor:
    """Log-probs of rows `index` from a plain forward of each row's own prompt + completion."""
    return token_logprobs(MODEL, gen.input_ids[index], gen.attention_mask[index], gen.position_ids[index],
                          start=gen.prompt_length)


@settings(max_examples=150, deadline=None)
@given(batches())
def test_any_row_subset_in_any_order_is_scored_against_its_own_prompts(drawn):
    gen, index = drawn
    batch = Batch.from_generation(gen)
    rows = batch.rows(index)
    with torch.no_grad():
        shared = completion_logprobs(MODEL, rows["prompt_ids"], rows["prompt_mask"], rows["prompt_positions"],
                                     rows["group"], rows["completion_ids"], rows["mask"] > 0,
                                     rows["completion_positions"], broadcast_width=batch.broadcast_width(index))
        plain = own_prompt_logprobs(gen, index)
    real = gen.completion_mask[index]
    assert (shared - plain)[real].abs().max() <= 1e-9


def test_the_fast_path_is_taken_for_whole_groups_in_any_group_order():
    """Whole groups one after the other keep the broadcast path even when the groups come in another
    order than the batch's (the case the prompt renumbering once got wrong)."""
    gen = Generation.assemble(torch.arange(1, 13).view(3, 4).repeat_interleave(4, 0),
                              torch.ones(12, 4, dtype=torch.bool), torch.ones(12, 2, dtype=torch.long),
                              torch.ones(12, 2, dtype=torch.bool), torch.zeros(12, 2))
    batch = Batch.from_generation(gen)
    index = torch.tensor([4, 5, 6, 7, 0, 1, 2, 3])
    assert batch.layout(index) == ([1, 0], [0, 0, 0, 0, 1, 1, 1, 1], 4)
    assert batch.rows(index)["prompt_ids"][:, 0].tolist() == [5, 1]   # group 1's prompt first
    assert batch.broadcast_width(torch.tensor([8, 4, 0])) == 1
    assert batch.broadcast_width(torch.tensor([0, 4, 1, 5])) == 0             # interleaved: gather


def step_zero_update(tmp_path, *overrides):
    """Step 0 of a reused batch (2 epochs x 2 minibatches) with a learning rate of 1e-12 (optimizer.lr must be
    positive; AdamW then moves a weight by ~1e-12, below float32's resolution of the weights), so the policy
    that computes every ratio is the one that sampled: each micro-batch's log-probs against the old. The random
    tiny model: the ratio does not depend on what the weights know."""
    from rookworld.run.build import build_run
    from rookworld.app.config import load_run
    from rookworld.tracking import make_tracker
    cfg = tiny_config(tmp_path, "model=tiny", "task_mix=mixed", "prompts_per_step=4", "grpo.group_size=3",
                      "grpo.num_iterations=2", "grpo.num_minibatches=2", "optimizer.lr=1e-12",
                      "optimizer.warmup_steps=0", *overrides)
    trainer = build_run(load_run(cfg), make_tracker(cfg))
    deviations = []
    original = trainer.learner.loss_and_backward

    def recording(inputs, **static):
        out = original(inputs, **static)
        mask = inputs["mask"] > 0
        deviations.append((out["logp"] - inputs["old_logp"].float())[mask].abs().max().item())
        return out

    trainer.learner.loss_and_backward = recording
    metrics, _ = trainer.train_step(0)
    return metrics, deviations


@pytest.mark.slow
def test_every_micro_batch_of_a_shuffled_minibatch_has_ratio_one_at_step_zero(tmp_path):
    """12 rows, 2 minibatches of 6: micro-batches of one row and of three rows (the unsplit run is the
    minibatch itself; tests/test_grpo_v2.py checks the update's invariance to the split), each in its own
    run (same seed, same rows). Ratio exactly 1 (log-prob difference 0 up to float32 rounding of a different batch
    shape) in every micro-batch, and the step loss equals the unsplit minibatch's."""
    unsplit, deviations = step_zero_update(tmp_path / "unsplit")
    assert len(deviations) == 2 * 2 and max(deviations) <= 1e-5
    for micro in (1, 3):
        metrics, deviations = step_zero_update(tmp_path / f"micro{micro}", f"grpo.micro_batch_size={micro}")
        assert len(deviations) == 2 * 2 * 6 // micro
        assert max(deviations) <= 1e-5, (micro, deviations)
        assert metrics["clip_ratio/region_mean"] == 0.0
        assert abs(metrics["loss"] - unsplit["loss"]) <= 1e-6 * max(1.0, abs(unsplit["loss"])), micro
