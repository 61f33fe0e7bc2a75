"""`python -m rookworld.bench [overrides]`: time real GRPO steps on the current device (steps.py)."""
from __future__ import annotations

import hydra
from omegaconf import DictConfig

from rookworld.bench.steps import format_report, run, write_results
from rookworld.config import PROJECT_TARGETS
from rookworld.errors import as_command


@hydra.main(config_path="../../conf", config_name="bench", execution_whitelist=PROJECT_TARGETS)
def main(cfg: DictConfig) -> None:
    with as_command():
        results = run(cfg)
    print(format_report(results))
    print("results: " + ", ".join(str(p.resolve()) for p in write_results(results, cfg.bench.output)))


if __name__ == "__main__":
    main()
