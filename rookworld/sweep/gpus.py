"""A GPU for each trial of a parallel sweep, chosen before CUDA initialises.

`rookworld.train` calls `assign_gpu(cfg)` first thing in every job. It acts only in a multirun with
`device` auto or cuda, on a machine with GPUs. A parallel launcher (hydra/launcher=parallel: joblib)
runs trials in worker processes that live across trials, and CUDA reads CUDA_VISIBLE_DEVICES once,
when it initialises, so a GPU belongs to a process, not to a trial: the first job in a process
claims a free slot of this sweep on this host and sets CUDA_VISIBLE_DEVICES to the slot's GPU; later
jobs in the process keep it. Slot k is GPU k mod G of the G visible GPUs, `trial.trials_per_gpu`
slots per GPU (so 2 per GPU spreads 4 workers over 2 GPUs as 0, 1, 0, 1). A slot is an exclusive
`flock` on a file in the system temp dir, held until the process exits: a dead worker frees its slot.

Visible GPUs: CUDA_VISIBLE_DEVICES when set (e.g. by SLURM, or to restrict a sweep to some GPUs),
else `nvidia-smi`; none (no nvidia-smi, as on a CPU machine): nothing to assign.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TextIO

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from rookworld.config import require
from rookworld.tracking import absolute_path, hydra_base_dir

log = logging.getLogger(__name__)

_held_slot: int | None = None
_held_lock: TextIO | None = None  # the open slot file: its flock lasts as long as this process


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


def slot_dir(sweep_dir: Path) -> Path:
    """Per host (the temp dir) and per sweep (a hash of its absolute dir)."""
    digest = hashlib.sha1(str(sweep_dir).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "rookworld-gpu-slots" / digest


def claim_slot(directory: Path, n_slots: int) -> tuple[int, TextIO]:
    """The first free slot in [0, n_slots) and its locked file (keep it open to keep the slot)."""
    directory.mkdir(parents=True, exist_ok=True)
    for slot in range(n_slots):
        handle = open(directory / f"slot_{slot}.lock", "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        return slot, handle
    raise RuntimeError(f"all {n_slots} GPU slots of this sweep are held by other trials: lower "
                       "hydra.launcher.n_jobs or raise trial.trials_per_gpu")


def _in_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def assign_gpu(cfg: DictConfig) -> str | None:
    """Set CUDA_VISIBLE_DEVICES for this job's process (see the module docstring); the GPU or None."""
    global _held_slot, _held_lock
    if _held_slot is not None:
        return os.environ.get("CUDA_VISIBLE_DEVICES")
    if not _in_multirun() or str(cfg.device) not in ("auto", "cuda"):
        return None
    gpus = visible_gpus()
    if not gpus:
        return None
    per_gpu = cfg.trial.trials_per_gpu
    require(isinstance(per_gpu, int) and per_gpu >= 1, "trial.trials_per_gpu", per_gpu, "must be an integer >= 1")
    sweep_dir = absolute_path(str(HydraConfig.get().sweep.dir), hydra_base_dir())
    _held_slot, _held_lock = claim_slot(slot_dir(sweep_dir), len(gpus) * per_gpu)
    gpu = gpus[_held_slot % len(gpus)]
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    log.info("GPU slot %d of this sweep: CUDA_VISIBLE_DEVICES=%s", _held_slot, gpu)
    return gpu
