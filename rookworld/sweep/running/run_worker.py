"""`python -m rookworld.sweep.running.run_worker SPEC INDEX`: the process the sweeper starts per GPU slot
(rookworld/sweep/running/worker.py says what it does). SIGTERM / SIGINT end it quietly with 128 + the signal,
once its trial's MLflow run is closed (KILLED)."""
from __future__ import annotations

import os
import pickle
import sys

from hydra.core.singleton import Singleton
from hydra.core.utils import configure_log, setup_globals
from omegaconf.basecontainer import BaseContainer

from sqlalchemy.exc import SQLAlchemyError

from rookworld.interrupts import Interrupted, interrupts_unmasked, raise_on_signals
from rookworld.sweep.storage.lock import StorageFault
from rookworld.sweep.storage.storage_url import redacted
from rookworld.tracking import one_line
from rookworld.sweep.running.worker import PARENT_PID_ENV, STORAGE_ENV, STORAGE_FAULT_EXIT, Worker, WorkerSpec, die_with_parent


def main(argv: list[str]) -> int:
    raise_on_signals()
    try:
        with interrupts_unmasked():
            return run(argv)
    except Interrupted as stop:  # its trial's run is closed (KILLED); the sweeper prints the one line
        return stop.exit_code


def run(argv: list[str]) -> int:
    die_with_parent(int(os.environ[PARENT_PID_ENV]))
    spec_path, index = argv
    with open(spec_path, "rb") as handle:
        spec: WorkerSpec = pickle.load(handle)
    setup_globals()
    Singleton.set_state({**spec.singletons, "omegaconf_resolvers": BaseContainer._resolvers})  # this process's own
    configure_log(spec.config.hydra.hydra_logging, spec.config.hydra.verbose,
                  execution_whitelist=spec.hydra_context.execution_whitelist)
    url = os.environ[STORAGE_ENV]
    try:
        return Worker(spec, int(index), url).run()
    except (StorageFault, SQLAlchemyError) as error:  # a full disk, a timeout, a lost database server
        text = str(error) if isinstance(error, StorageFault) else one_line(error)
        print(f"rookworld: error: sweep worker {index}: {redacted(text, url)}", file=sys.stderr, flush=True)
        return STORAGE_FAULT_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
