"""`python -m rookworld.sft`: supervised (behavioural-cloning) training on RookWorld task documents; the loop,
its documents and its data-parallel run (torchrun) are rookworld/sft/loop.py's."""
from __future__ import annotations

import hydra
from omegaconf import DictConfig

from rookworld.app.composition import run_hydra_main
from rookworld.app.config import PROJECT_TARGETS
from rookworld.app.errors import as_command
from rookworld.sft.loop import run


@hydra.main(config_path="../../conf", config_name="sft", execution_whitelist=PROJECT_TARGETS)
def main(cfg: DictConfig) -> float:
    with as_command():
        return run(cfg).get("eval/score")  # None on the other ranks of a data-parallel run


if __name__ == "__main__":
    run_hydra_main(main, "sft")
