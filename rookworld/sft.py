"""`python -m rookworld.sft`: supervised (behavioural-cloning) training on RookWorld task documents; the loop,
its documents and its data-parallel run (torchrun) are rookworld/supervised_training.py's."""
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
