"""Rows scored while the GPU generates the rest get the rewards they would get afterwards."""
import torch

from rookworld.run.build import build_run
from rookworld.app.config import load_run
from rookworld.model.fast_sampling import StaticDecoder
from rookworld.judge.rollout import decode_completions
from rookworld.judge.scoring import StepScores
from rookworld.tracking import make_tracker
from train_helpers import tiny_config


def test_rows_scored_during_generation_match_scoring_after_it(tmp_path):
    cfg = tiny_config(tmp_path, "prompts_per_step=4")
    trainer = build_run(load_run(cfg), make_tracker(cfg))
    # The CUDA decoder's loop (checks and early reports) on the CPU: P: rows stop at their 24-token
    # cap while A: rows run on.
    trainer.decoder = StaticDecoder(trainer.policy, check_every=4)
    rows = trainer.sample_rows()
    scores = StepScores(trainer.tokenizer, trainer.reward_fn, rows)
    rollout = trainer.generate(rows, on_finished=scores.add)
    early = set(scores.results)
    scores.decode_rest(rollout)
    rewards, scored = scores.finish()

    texts = decode_completions(trainer.tokenizer, rollout)
    expected_scored = [trainer.reward_fn(problem, text) for problem, text in zip(rows, texts)]
    expected = torch.tensor([s.total for s in expected_scored], dtype=torch.float32)
    assert 0 < len(early) < len(rows)
    assert [scores.texts[row] for row in range(len(rows))] == texts
    assert torch.equal(rewards, expected)
    assert [s.components for s in scored] == [s.components for s in expected_scored]
