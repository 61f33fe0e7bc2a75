"""`python -m rookworld.bench [overrides]`: time real GRPO steps on the current device (steps.py).
A failed self-check stops before the timing and exits with status 1 and one line naming the checks."""
from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from rookworld.bench.steps import format_report, run, self_check_line, write_results
from rookworld.app.config import PROJECT_TARGETS, load_bench
from rookworld.app.errors import as_command


@hydra.main(config_path="../../conf", config_name="bench", execution_whitelist=PROJECT_TARGETS)
def main(cfg: DictConfig) -> None:
    with as_command():
        results = run(load_bench(cfg))
    print(format_report(results))
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    print("results: " + ", ".join(str(p.resolve()) for p in write_results(results, cfg.bench.output, run_dir)))
    if not results.get("self_check", {"ok": True})["ok"]:
        print(f"rookworld: error: {self_check_line(results['self_check'])}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
