"""A GPU for each worker of a sweep, chosen before CUDA initialises: worker k gets CUDA_VISIBLE_DEVICES = GPU
k mod G of the G visible GPUs (CUDA_VISIBLE_DEVICES when set, else `nvidia-smi`; none on a CPU machine), and
n_jobs may be at most G x `trial.trials_per_gpu`. It acts only when `device` is auto or cuda.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess

from rookworld.app.config import require

log = logging.getLogger(__name__)


def visible_gpus() -> list[str]:
    """GPU ids this process may use, found without initialising CUDA."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip()]
    if shutil.which("nvidia-smi") is None:
        return []
    listing = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    if listing.returncode != 0:  # no usable driver: the job runs where device=auto puts it (the CPU)
        log.warning("nvidia-smi failed (%s): no GPU assignment", " ".join(listing.stderr.split()))
        return []
    return [line.strip() for line in listing.stdout.splitlines() if line.strip()]


def worker_gpus(n_workers: int, trials_per_gpu: object, device: str) -> list[str | None]:
    """The GPU of each worker (None: no pinning, e.g. device=cpu or no GPU here)."""
    require(isinstance(trials_per_gpu, int) and not isinstance(trials_per_gpu, bool) and trials_per_gpu >= 1,
            "trial.trials_per_gpu", trials_per_gpu, "must be an integer >= 1")
    if device not in ("auto", "cuda"):
        return [None] * n_workers
    gpus = visible_gpus()
    if not gpus:
        return [None] * n_workers
    slots = len(gpus) * trials_per_gpu
    require(n_workers <= slots, "hydra.sweeper.n_jobs", n_workers,
            f"at most {slots} workers: {len(gpus)} GPUs x trial.trials_per_gpu={trials_per_gpu}")
    return [gpus[k % len(gpus)] for k in range(n_workers)]


def worker_threads(n_workers: int) -> int:
    """CPU threads per worker: the cores shared out, at least one."""
    return max(1, (os.cpu_count() or 1) // n_workers)
