"""The entry points' one exit policy. A user error (bad config, model, data path, tracking store)
prints `rookworld: error: <one line>`, writes it to the run folder's log and exits with status 2;
SIGTERM / SIGINT (rookworld.interrupts) print `rookworld: stopped by SIGTERM` and exit with 128 + the
signal (143 / 130) once the run has closed its MLflow run; anything else is a bug and raises. In a Hydra multirun both propagate
instead: the sweeper records a user error as the trial's failure, and a sweep worker ends on a
signal (rookworld/sweep/running/run_worker.py). A run refused before it wrote anything leaves no run folder."""
from __future__ import annotations

import contextlib
import logging
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from rookworld.interrupts import Interrupted, raise_on_signals
from rookworld.model.load_error import ModelLoadError
from rookworld.specs.rules import ConfigError
from rookworld.tracking import TrackingError

USER_ERRORS = (ConfigError, ModelLoadError, TrackingError, FileNotFoundError)


@contextmanager
def as_command() -> Iterator[None]:
    """The body of a `python -m rookworld.<command>` main function, under the exit policy above."""
    raise_on_signals()  # a no-op in a sweep worker, which installed them for its whole life
    try:
        with contextlib.redirect_stdout(ConsoleToRunLog(sys.stdout)):  # the run log holds what the console shows
            yield
    except USER_ERRORS as error:
        if in_multirun():
            raise
        print(f"rookworld: error: {error}", file=sys.stderr)
        if not remove_unused_run_folder():
            to_run_log(f"rookworld: error: {error}", logging.ERROR)  # the run folder's log says why it ended
        sys.exit(2)
    except Interrupted as stop:
        if in_multirun():
            raise
        print(f"rookworld: {stop.stop_reason}", file=sys.stderr)
        to_run_log(f"rookworld: {stop.stop_reason}", logging.WARNING)  # the run log's last line says why it ended
        sys.exit(stop.exit_code)


class ConsoleToRunLog:
    """The command's stdout: each line goes on to `stream` (the terminal) and to the run's log (to_run_log)."""

    def __init__(self, stream) -> None:
        self.stream, self.partial = stream, ""

    def write(self, text: str) -> int:
        self.stream.write(text)
        *lines, self.partial = (self.partial + text).split("\n")
        for line in lines:
            if line.strip():
                to_run_log(line)
        return len(text)

    def __getattr__(self, name: str):  # flush, isatty, fileno, encoding: the stream's own
        return getattr(self.stream, name)


def in_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def to_run_log(message: str, level: int = logging.INFO) -> None:
    """`message` written to the run's log file (Hydra's job log: train.log, sft.log) and not to the
    terminal, where it is printed already: handed to the root logger's file handlers alone, so whatever
    hydra/job_logging the user picked is kept (none has no file: nothing is written)."""
    record = logging.LogRecord("rookworld", level, __file__, 0, message, None, None)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler) and level >= handler.level:
            handler.handle(record)


def remove_unused_run_folder() -> bool:
    """Remove the folder Hydra made for this run when the run wrote nothing to it (only Hydra's .hydra/ and
    an empty log: a run refused at its config), and the parents it leaves empty up to the launch folder.
    False when there is no such folder or the run used it."""
    if not HydraConfig.initialized():
        return False
    runtime = HydraConfig.get().runtime
    folder, launch = Path(runtime.output_dir), Path(runtime.cwd)
    if launch.is_relative_to(folder):  # hydra.run.dir=. : the folder the user launched from is never removed
        return False
    log = folder / f"{HydraConfig.get().job.name}.log"
    entries = {p.name for p in folder.iterdir()} if folder.is_dir() else {None}
    if not entries <= {".hydra", log.name} or (log.exists() and log.stat().st_size > 0):
        return False
    shutil.rmtree(folder)
    for parent in folder.parents:
        if parent == launch or not parent.is_relative_to(launch) or any(parent.iterdir()):
            break
        parent.rmdir()
    return True
