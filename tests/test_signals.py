"""A stopped run ends cleanly: `python -m rookworld.train` (a real process, a real sqlite MLflow store)
stopped by SIGTERM (`kill PID`, `timeout`) or SIGINT (Ctrl-C, sent to the terminal's process group)
ends its MLflow run KILLED with outcome `failed` and the signal as stop reason, exits 143 / 130 and
prints one line on stderr: no traceback from the process or from its metric-writer child."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_helpers import SMALL_POOLS, mlflow_runs, subprocess_env, wait_for

from rookworld.interrupts import STOP_SIGNALS, Interrupted, interrupts_unmasked, raise_on_signals

# The random tiny model on one problem a step: a step takes well under a second on a CPU.
ENDLESS_RUN = ["model=tiny", "device=cpu", "steps=100000", "prompts_per_step=1", "grpo.group_size=2",
               "task_mix=env_only", "sampling.max_new_tokens.A=8", "eval.every=0", "eval.num_policy=1",
               "eval.num_arbiter=1", "eval.cache_dir=null", *SMALL_POOLS]


def start_run(directory: Path) -> tuple[subprocess.Popen[str], Path]:
    log = directory / "stdout.log"
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, "-m", "rookworld.train", *ENDLESS_RUN], cwd=directory,
                                   env=subprocess_env(), stdout=out, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)  # its own process group, as in a terminal
    wait_for(lambda: "step 2/" in log.read_text() or process.poll() is not None, 300, "the run's second step")
    assert process.poll() is None, process.communicate()[1][-3000:]
    return process, log


@pytest.mark.parametrize(("name", "send", "code"), [
    ("SIGTERM", lambda p: p.send_signal(signal.SIGTERM), 143),      # kill PID, timeout
    ("SIGINT", lambda p: os.killpg(p.pid, signal.SIGINT), 130),     # Ctrl-C: the whole foreground group
])
@pytest.mark.slow
def test_a_signal_ends_the_run_killed_with_its_reason_in_one_line(tmp_path: Path, name, send, code) -> None:
    process, log = start_run(tmp_path)
    send(process)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == code, stderr[-3000:]
    assert stderr.strip().splitlines() == [f"rookworld: stopped by {name}"], stderr[-3000:]
    assert "Traceback" not in log.read_text()
    (train_log,) = tmp_path.glob("outputs/*/*/train.log")
    assert train_log.read_text().strip().splitlines()[-1].endswith(f"rookworld: stopped by {name}")  # its last line
    (run,) = mlflow_runs(tmp_path)
    assert run.info.status == "KILLED"
    assert run.data.tags["rookworld.outcome"] == "failed"
    assert run.data.tags["rookworld.stop_reason"] == f"stopped by {name}"
    assert run.data.metrics["reward"] is not None  # the metrics logged before the signal are kept


@pytest.mark.slow
def test_a_second_signal_while_the_run_closes_changes_nothing(tmp_path: Path) -> None:
    process, _ = start_run(tmp_path)
    os.killpg(process.pid, signal.SIGINT)
    time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and stderr.strip().splitlines() == ["rookworld: stopped by SIGINT"], stderr
    (run,) = mlflow_runs(tmp_path)
    assert run.info.status == "KILLED" and run.data.tags["rookworld.stop_reason"] == "stopped by SIGINT"


def test_only_the_first_signal_raises_and_names_its_exit_code() -> None:
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        raise_on_signals()
        with pytest.raises(Interrupted) as stopped:
            signal.raise_signal(signal.SIGTERM)
        assert (stopped.value.stop_reason, stopped.value.exit_code) == ("stopped by SIGTERM", 143)
        raise_on_signals()  # a second call keeps the handler that already fired
        signal.raise_signal(signal.SIGINT)  # ignored while the run closes
        assert Interrupted(signal.SIGINT).exit_code == 130
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


FINALIZER_SCRIPT = """
import os, signal, time
from rookworld.interrupts import Interrupted, raise_on_signals
raise_on_signals()
class SignalledWhileFinalized:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10000):  # the handler runs at one of these bytecodes, inside the finalizer
            pass
try:
    SignalledWhileFinalized()
    time.sleep(5)
    print("not stopped")
except Interrupted as stop:
    print("stopped", stop.exit_code)
"""


def test_a_signal_that_lands_in_a_finalizer_still_stops_the_run_without_a_traceback() -> None:
    """The garbage collector runs finalizers and weakref callbacks at any bytecode; an Interrupted raised in one
    is dropped by Python with an "Exception ignored in" traceback. It is sent again and stops the run."""
    done = subprocess.run([sys.executable, "-c", FINALIZER_SCRIPT], env=subprocess_env(), capture_output=True,
                          text=True, timeout=60)
    assert (done.stdout, done.stderr) == ("stopped 130\n", "")


def test_an_interrupt_hidden_by_a_failing_cleanup_is_raised_again() -> None:
    """Optuna's journal file lock, interrupted while it waits for the lock, releases a lock it never took
    and raises RuntimeError("Error: did not possess lock") in place of the interrupt: the sweep must still
    stop as stopped (130), not crash (1)."""
    def acquire_like_optuna() -> None:
        try:
            raise Interrupted(signal.SIGINT)  # the signal, landing in the lock's wait
        except BaseException:
            raise RuntimeError("Error: did not possess lock")  # its release of a lock it does not hold

    with pytest.raises(Interrupted) as caught:
        with interrupts_unmasked():
            acquire_like_optuna()
    assert caught.value.exit_code == 130
    with pytest.raises(RuntimeError, match="unrelated"):  # any other failure passes through unchanged
        with interrupts_unmasked():
            raise RuntimeError("unrelated")
