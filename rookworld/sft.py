"""`python -m rookworld.sft`: supervised (behavioural-cloning) training on RookWorld task documents (the loop:
rookworld/supervised_training.py, which warm-start rounds run too).
On several GPUs: `torchrun --standalone --nproc_per_node N -m rookworld.sft ...` (rookworld/distributed.py;
sft.batch_size stays the documents per optimizer step, split over the processes).

The documents (rookworld/data/documents.py): A: documents from python-chess alone, without limit,
with a move drawn by case so rare transitions are common enough to learn; P: documents from the
annotated training positions. Held-out positions never appear in training documents. Held-out loss is measured on documents of the
held-out sets; the task evaluation is the GRPO loop's (rookworld.evaluate).
"""
from __future__ import annotations

import hydra
from omegaconf import DictConfig

from rookworld.composition import run_hydra_main
from rookworld.config import PROJECT_TARGETS
from rookworld.errors import as_command
from rookworld.supervised_training import run


@hydra.main(config_path="../conf", config_name="sft", execution_whitelist=PROJECT_TARGETS)
def main(cfg: DictConfig) -> float:
    with as_command():
        return run(cfg).get("eval/score")  # None on the other ranks of a data-parallel run


if __name__ == "__main__":
    run_hydra_main(main, "sft")
