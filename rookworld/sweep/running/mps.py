"""CUDA MPS for a sweep's workers: several workers on one GPU run their kernels at once, not by turns.

`trial.mps`: auto | on | off (docs/sweeps.md, Many trials on one GPU machine); a daemon the user runs
(CUDA_MPS_PIPE_DIRECTORY set) is used as it is. The launch's private daemon gets a short pipe folder (a Unix
socket's path) and `<launch>/.sweep/mps_log`, and starts without CUDA_VISIBLE_DEVICES, so a worker's GPU id names
the same GPU under it. A keeper process (rookworld/sweep/running/mps_keeper.py) stops it when the launch ends,
however it ends (PR_SET_PDEATHSIG, even on SIGKILL).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rookworld.app.config import require

CONTROL = "nvidia-cuda-mps-control"
MODES = ("auto", "on", "off")
CONTROL_TIMEOUT_S = 30  # one command to the control daemon
KEEPER_READY = b"ready\n"  # the keeper's line once it waits for the signal to stop the daemon


class MpsUnavailable(RuntimeError):
    """MPS could not be started; the message says why."""


def mps_mode(value: object) -> str:
    require(value in MODES, "trial.mps", value, "expected auto, on or off")
    return str(value)


def shares_a_gpu(gpus: list[str | None]) -> bool:
    pinned = [g for g in gpus if g is not None]
    return len(set(pinned)) < len(pinned)


def control_env(pipe_dir: str, log_dir: str) -> dict[str, str]:
    return {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": pipe_dir, "CUDA_MPS_LOG_DIRECTORY": log_dir}


def control(command: str, pipe_dir: str, log_dir: str) -> subprocess.CompletedProcess[str]:
    """Send one command (`quit`, `get_server_list`, ...) to the control daemon of `pipe_dir`."""
    return subprocess.run([CONTROL], input=command + "\n", env=control_env(pipe_dir, log_dir), capture_output=True,
                          text=True, timeout=CONTROL_TIMEOUT_S)


@dataclass
class MpsDaemon:
    """A private MPS control daemon of one launch, with its keeper process."""

    pipe_dir: str
    log_dir: str
    keeper: subprocess.Popen[bytes]

    @classmethod
    def for_workers(cls, mode: str, gpus: list[str | None], control_dir: Path) -> MpsDaemon | None:
        """The daemon the workers on `gpus` need under `mode` (see the module docstring), or None."""
        if mode == "off" or not shares_a_gpu(gpus) or os.environ.get("CUDA_MPS_PIPE_DIRECTORY"):
            return None
        try:
            return cls.start(control_dir)
        except MpsUnavailable as error:
            if mode == "on":
                raise
            workers = len(gpus)
            print(f"rookworld: CUDA MPS unavailable ({error}): {workers} workers share "
                  f"{len(set(gpus))} GPUs by time slicing (trial.mps=off hides this notice)", file=sys.stderr,
                  flush=True)
            return None

    @classmethod
    def start(cls, control_dir: Path) -> MpsDaemon:
        if shutil.which(CONTROL) is None:
            raise MpsUnavailable(f"no {CONTROL} on PATH")
        pipe_dir = tempfile.mkdtemp(prefix="rookworld-mps-")
        log_dir = control_dir / "mps_log"
        log_dir.mkdir(exist_ok=True)
        env = control_env(pipe_dir, str(log_dir))
        env.pop("CUDA_VISIBLE_DEVICES", None)  # the daemon sees every GPU: each worker's own id means the same there
        started = subprocess.run([CONTROL, "-d"], env=env, capture_output=True, text=True, timeout=CONTROL_TIMEOUT_S)
        answer = control("get_server_list", pipe_dir, str(log_dir)) if started.returncode == 0 else started
        if answer.returncode != 0:
            control("quit", pipe_dir, str(log_dir)) if started.returncode == 0 else None
            shutil.rmtree(pipe_dir, ignore_errors=True)
            reason = " ".join((answer.stderr or answer.stdout).split()) or f"exit code {answer.returncode}"
            raise MpsUnavailable(f"{CONTROL}: {reason}")
        keeper = subprocess.Popen([sys.executable, "-m", "rookworld.sweep.running.mps_keeper", pipe_dir, str(log_dir),
                                   str(os.getpid())], stdout=subprocess.PIPE)
        assert keeper.stdout is not None
        if keeper.stdout.readline() != KEEPER_READY:  # it died before it could stop the daemon
            control("quit", pipe_dir, str(log_dir))
            shutil.rmtree(pipe_dir, ignore_errors=True)
            raise MpsUnavailable(f"its keeper process exited with code {keeper.wait()}")
        return cls(pipe_dir, str(log_dir), keeper)

    def env(self) -> dict[str, str]:
        """What a worker's environment needs to use this daemon."""
        return {"CUDA_MPS_PIPE_DIRECTORY": self.pipe_dir, "CUDA_MPS_LOG_DIRECTORY": self.log_dir}

    def stop(self) -> None:
        """Stop the daemon (its keeper does it) and wait for that."""
        if self.keeper.poll() is None:
            self.keeper.send_signal(signal.SIGTERM)
        self.keeper.wait(timeout=2 * CONTROL_TIMEOUT_S)
