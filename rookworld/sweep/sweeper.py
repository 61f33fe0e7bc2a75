"""rookworld's Optuna sweeper: asynchronous workers on one shared study, on one machine or many.

`hydra/sweeper: rookworld_optuna` (conf/hydra/sweeper/rookworld_optuna.yaml) selects it, as every
sweeps/*.yaml does; Hydra finds the class through the `hydra.plugins` entry point in pyproject.toml.
`python -m rookworld.train -m sweeps=NAME` then:

1. **validates** every knob before anything starts (rookworld/specs/sweep.py, built by config.load_sweeper): the sweeper's
   keys, the search space, the sampler, and the trial config itself: it composes a trial's config
   for values touching every choice and both ends of every range, checks that command-line values
   keep the type of their defaults (`steps=abc`), and runs `hydra.sweeper.validate` on it
   (rookworld.config.validate). Then it opens the storage and creates this launch's folder. A bad
   value exits 2 with one line `rookworld: error: key=value: rule`, leaving nothing behind;
2. **joins the study**, under the study's lock (rookworld/sweep/storage/lock.py): creates it or loads it,
   numbers this launch (worker seeds), fails stale trials of dead workers, and gets the study's one
   MLflow parent run (rookworld/sweep/report/mlflow_parent.py);
3. **starts the workers**: `min(n_jobs, trials left)` processes `python -m rookworld.sweep.running.run_worker`
   (rookworld/sweep/running/worker.py), worker k pinned to GPU k mod G (rookworld/sweep/running/gpus.py), with CUDA MPS
   when workers share a GPU (rookworld/sweep/running/mps.py), each asking, running and telling trials until the
   study holds `n_trials`; they die with this process. A worker that dies is noticed at once: its trial
   is failed and re-queued and a new worker takes its slot (`max_worker_restarts`);
4. **ends the study** when it is finished (no trial running anywhere): prints the summary and logs
   it on the parent run, which it ends. Otherwise (other machines still running trials) the last
   launch to finish does that.

The launch folder is `hydra.sweep.dir`, made unique (`_1`, `_2`, ... appended when another launch
took it in the same second); trials go to `trial_<N>` inside it.
"""

from __future__ import annotations

import sys
from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class RookworldOptunaSweeper(Sweeper):
    """Asynchronous Optuna workers on a shared study (see the module docstring)."""

    def __init__(self, sampler: DictConfig, direction: Any, storage: Any, study_name: Any, n_trials: Any,
                 n_jobs: Any, max_failure_rate: Any, params: Any, stale_retries: Any, heartbeat_interval_s: Any,
                 grace_period_s: Any, validate: Any, max_worker_restarts: Any, connect_timeout_s: Any,
                 statement_timeout_s: Any, lock_wait_s: Any, lock_lease_s: Any, stages: Any) -> None:
        # checked in sweep(): an error here would be wrapped by Hydra's instantiate into a traceback
        self._raw = {"sampler": sampler, "direction": direction, "storage": storage, "study_name": study_name,
                     "n_trials": n_trials, "n_jobs": n_jobs, "max_failure_rate": max_failure_rate, "params": params,
                     "stale_retries": stale_retries, "heartbeat_interval_s": heartbeat_interval_s,
                     "grace_period_s": grace_period_s, "validate": validate,
                     "max_worker_restarts": max_worker_restarts, "connect_timeout_s": connect_timeout_s,
                     "statement_timeout_s": statement_timeout_s, "lock_wait_s": lock_wait_s, "lock_lease_s": lock_lease_s,
                     "stages": stages}
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

