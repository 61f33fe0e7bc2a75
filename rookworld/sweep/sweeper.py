"""rookworld's Optuna sweeper: asynchronous workers on one shared study, on one machine or many.

`hydra/sweeper: rookworld_optuna` selects it (Hydra finds it through pyproject.toml's `hydra.plugins` entry
point); rookworld/sweep/running/launch.py does the work: validate, join the study, run the workers, end the study
(docs/sweeps.md, How it runs). A bad knob is one line, exit 2.
"""

from __future__ import annotations

import sys
from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class RookworldOptunaSweeper(Sweeper):
    """Asynchronous Optuna workers on a shared study (see the module docstring)."""

    def __init__(self, **raw: Any) -> None:
        self._raw = raw  # hydra.sweeper.*, checked in sweep() (Hydra's instantiate would wrap an error here)
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context, self.task_function, self.config = hydra_context, task_function, config

    def sweep(self, arguments: list[str]) -> None:
        # Imported here, not at the top: Hydra imports this plugin module at the start of every command
        # (`python -m rookworld.train`, sweep or not), and the launch pulls Optuna, SQLAlchemy and the sweep package.
        from sqlalchemy.exc import SQLAlchemyError

        from rookworld.interrupts import Interrupted, interrupts_unmasked, raise_on_signals
        from rookworld.sweep.running.launch import Launch, UserError
        from rookworld.sweep.storage.lock import StorageFault

        raise_on_signals()
        try:
            with interrupts_unmasked():
                launch = Launch.prepare(self.config, self.hydra_context, self.task_function, arguments, self._raw)
                code = launch.run_workers()
                launch.finish()
        except UserError as error:
            print(f"rookworld: error: {error}", file=sys.stderr, flush=True)
            sys.exit(2)
        except (StorageFault, SQLAlchemyError) as error:  # a full disk, a timeout, a lost database server
            from rookworld.sweep.storage.storage_url import redacted
            from rookworld.tracking import one_line

            text = str(error) if isinstance(error, StorageFault) else one_line(error)
            print(f"rookworld: error: {redacted(text, str(self._raw['storage']))}", file=sys.stderr, flush=True)
            sys.exit(1)
        except Interrupted as stop:
            # the workers closed their trials' runs (KILLED); the same command resumes the study
            print(f"rookworld: {stop.stop_reason}: sweep stopped; the same command resumes it", file=sys.stderr,
                  flush=True)
            sys.exit(stop.exit_code)
        if code:
            sys.exit(code)

