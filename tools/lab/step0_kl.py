"""Step 0's `kl` (the policy still equals the reference): one GRPO step of the shipped rookworld_tiny
model on the current device, A: problems only, 2 prompts x 3 completions, KL on. Extra arguments are
config overrides, e.g.
    python tools/lab/step0_kl.py grpo.micro_batch_size=1
    python tools/lab/step0_kl.py device=cuda
"""
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir

from rookworld.app.config import load_run
from rookworld.run.build import build_run
from rookworld.tracking import make_tracker

SHAPES = ["experiment=quickstart", "tracking=none", "eval.cache_dir=null", "task_mix=env_only", "kl=fixed",
          "prompts_per_step=2", "grpo.group_size=3", "sampling.max_new_tokens.A=60"]

with initialize_config_dir(config_dir=str(Path(__file__).resolve().parents[2] / "conf")):
    cfg = compose("config", overrides=[*SHAPES, *sys.argv[1:]])
trainer = build_run(load_run(cfg), make_tracker(cfg))
metrics, _ = trainer.train_step(0)
print(f"{' '.join(sys.argv[1:]) or 'defaults'} on {trainer.device}: kl at step 0 = {metrics['kl']!r}")
