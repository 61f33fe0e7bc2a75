"""Optuna studies of rookworld sweeps: storages, each trial's own number, trials whose worker died.

Shared by the launch, its workers and each job's pruning hook. Relative file storages are relative to the
launch directory, in every process alike; a database's tables are created under the storage lock. A RUNNING
trial is stale when its worker is gone (same host, process ended) or its heartbeat, stamped by the storage's
clock, is older than the grace period (no two hosts' clocks are compared); it is failed and re-queued with the
same params at most `retries` times (docs/sweeps.md, Storage, many machines, resume and killed sweeps).
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.trial import FrozenTrial, TrialState
from omegaconf import OmegaConf
from sqlalchemy.exc import SQLAlchemyError

from rookworld.specs.rules import ConfigError
from rookworld.tracking import CONF_DIR, SQLITE, one_line
from rookworld.sweep.storage.clock import StorageClock
from rookworld.sweep.storage.host import host_id, process_alive, process_start
from rookworld.sweep.storage.journal import SafeJournalBackend
from rookworld.sweep.storage.lock import StorageFault, storage_lock
from rookworld.sweep.storage.periodic import Periodic
from rookworld.sweep.storage.storage_url import JOURNAL_PREFIX, DbTimeouts, database_url, default_timeouts, masked, redacted, storage_file

log = logging.getLogger(__name__)

OWNER_ATTR = "rookworld:sweeper"
STALE_ATTR = "rookworld:stale"
RETRY_OF_ATTR = "rookworld:retry_of"
RETRIES_ATTR = "rookworld:retries"
FAIL_REASON_ATTR = "fail_reason"
OUTCOME_ATTR = "rookworld:outcome"  # trial user attr: the run's outcome (success, kl_failure, ...)
STEP_ATTR = "rookworld:step"  # trial user attr: the training step of its last report to the pruner
OBJECTIVE_SE_ATTR = "rookworld:objective_se"  # trial user attr: the objective's standard error (RunResult.objective_se)
GPU_ATTR = "rookworld:gpu"  # trial user attr: the GPU its worker ran it on (host id and CUDA_VISIBLE_DEVICES)
CARRIED_PREFIX = "rookworld:work."  # user attrs a re-queued trial keeps: what a staged sweep's trial runs
STORAGE_ERRORS = (ImportError, ValueError, SQLAlchemyError, OSError)  # open_storage: a bad URL, no driver, no server
_SQLITE_LOCK_TIMEOUT_S = 60  # parallel jobs wait for SQLite's write lock instead of failing after 5 s


# ---------------------------------------------------------------- storage


class MissingDriverError(ImportError):
    """A database URL whose driver module is not installed; the message names the module."""


def open_storage(url: str, base_dir: str, timeouts: DbTimeouts) -> BaseStorage:
    """The storage a URL names (rookworld/sweep/storage/storage_url.py); parent folders of file stores are created. A
    journal is repaired first (rookworld/sweep/storage/journal.py); a database's connections get `timeouts`."""

    path = storage_file(url, base_dir)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    if url.startswith(JOURNAL_PREFIX):
        return JournalStorage(SafeJournalBackend(path))
    try:
        with storage_lock(url, base_dir, "schema", timeouts):  # fresh databases: one process creates the tables
            if path is not None:
                timeout = {"connect_args": {"timeout": _SQLITE_LOCK_TIMEOUT_S}}
                return RDBStorage(f"{SQLITE}{path}", engine_kwargs=timeout)
            return RDBStorage(database_url(url), engine_kwargs={"connect_args": timeouts.connect_args()})
    except ModuleNotFoundError as error:
        raise MissingDriverError(f"the database driver module {error.name!r} is not installed (for PostgreSQL: "
                                 "pip install 'rookworld[postgresql]', i.e. psycopg2-binary)") from error


def trial_id(storage: BaseStorage, study_name: str, number: int) -> int:
    return storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(study_name), number)


# ---------------------------------------------------------------- heartbeat


@dataclass(frozen=True)
class Owner:
    """The worker process running a trial: its host id, pid and start time (rookworld/sweep/storage/host.py)."""

    host: str
    pid: int
    started: int | None

    @classmethod
    def this_process(cls) -> Owner:
        return cls(host_id(), os.getpid(), process_start(os.getpid()))

    @classmethod
    def of(cls, trial: FrozenTrial) -> tuple[Owner, float] | None:
        stamp = trial.system_attrs.get(OWNER_ATTR)
        if not stamp:
            return None
        return cls(stamp["host"], int(stamp["pid"]), stamp.get("started")), float(stamp["heartbeat"])

    def stamp(self, now: float) -> dict[str, Any]:
        return {"host": self.host, "pid": self.pid, "started": self.started, "heartbeat": now}

    def gone(self) -> bool:
        """True when this process's host id is the owner's and the owner process no longer runs."""
        return self.host == host_id() and not process_alive(self.pid, self.started)

    def __str__(self) -> str:
        return f"{self.host.split('/')[0]}:{self.pid}"


class Heartbeat:
    """Stamps the trials this sweeper runs as alive, every `interval_s`, from a daemon thread.

    `own(trial_id)` stamps a trial at once and keeps stamping it until it is finished (told by the
    sweeper or pruned by its job).

    On every storage, SQLite and PostgreSQL too: RDBStorage's own heartbeat (heartbeat_interval, grace_period,
    failed_trial_callback) cannot keep three tested behaviours (tests/test_sweeps.py, stale trials): it knows
    only the time since the last beat, so a worker that died on this host is not failed at once by its pid;
    it fails the trial first and calls the callback after, when the storage refuses the `fail_reason` and
    `rookworld:stale` attrs that tell a cut run from one that raised (finished_count, the stage report); and
    the journal storage, the sweeps' default, has no heartbeat at all.
    """

    def __init__(self, storage: BaseStorage, interval_s: float, clock: StorageClock) -> None:
        self._storage = storage
        self._clock = clock
        self._owner = Owner.this_process()
        self._owned: set[int] = set()
        self._lock = threading.Lock()
        self._periodic = Periodic(self._beat_reporting_errors, interval_s, "rookworld-heartbeat")

    def own(self, trial_id: int) -> None:
        self._storage.set_trial_system_attr(trial_id, OWNER_ATTR, self._owner.stamp(self._clock.now()))
        with self._lock:
            self._owned.add(trial_id)

    def __enter__(self) -> Heartbeat:
        self._periodic.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._periodic.__exit__(*exc_info)

    def _beat_reporting_errors(self) -> None:
        try:
            self.beat()
        except Exception as error:  # noqa: BLE001 - reported; a storage that stays down lets the trial go stale
            log.warning("heartbeat not stamped: %s", one_line(error))

    def beat(self) -> None:
        with self._lock:
            owned = sorted(self._owned)
        for trial_id in owned:
            if not self._stamp_if_running(trial_id):
                with self._lock:
                    self._owned.discard(trial_id)

    def _stamp_if_running(self, trial_id: int) -> bool:
        if self._storage.get_trial(trial_id).state != TrialState.RUNNING:
            return False
        try:
            self._storage.set_trial_system_attr(trial_id, OWNER_ATTR, self._owner.stamp(self._clock.now()))
        except UpdateFinishedTrialError:
            return False  # finished between the check and the stamp
        return True


# ---------------------------------------------------------------- stale trials


@dataclass(frozen=True)
class StaleTrial:
    number: int
    reason: str
    retried: bool


def stale_reason(trial: FrozenTrial, grace_s: float, now: float) -> str | None:
    """Why a RUNNING trial is stale, or None when its worker may still be running it (`now`: the storage's
    clock, which stamped the heartbeat)."""
    owned = Owner.of(trial)
    if owned is None:
        started = trial.datetime_start
        age = (datetime.now(started.tzinfo) - started).total_seconds() if started else float("inf")
        return f"running {age:.0f} s with no worker heartbeat" if age > grace_s else None
    owner, heartbeat = owned
    if owner.gone():
        return f"its worker process {owner} is gone"
    silence = now - heartbeat
    return f"no heartbeat from its worker {owner} for {silence:.0f} s" if silence > grace_s else None


def resolve_stale_trials(study: optuna.Study, storage: BaseStorage, grace_s: float, retries: int,
                         clock: StorageClock) -> list[StaleTrial]:
    """Fail the study's stale RUNNING trials and re-queue each (same params) up to `retries` times."""
    resolved = []
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    now = clock.now() if running else 0.0
    for trial in running:
        reason = stale_reason(trial, grace_s, now)
        if reason is not None and _fail_stale(storage, trial_id(storage, study.study_name, trial.number), reason):
            retried = _requeue(study, trial, retries)
            resolved.append(StaleTrial(trial.number, reason, retried))
            log.warning("trial %d was RUNNING but stale (%s): failed%s", trial.number, reason,
                        ", re-queued with the same params" if retried else "")
    return resolved


def _fail_stale(storage: BaseStorage, trial_id: int, reason: str) -> bool:
    try:
        storage.set_trial_user_attr(trial_id, FAIL_REASON_ATTR, f"stale: {reason}")
        storage.set_trial_system_attr(trial_id, STALE_ATTR, True)
        storage.set_trial_state_values(trial_id, TrialState.FAIL)
    except UpdateFinishedTrialError:
        return False  # its job was alive after all and finished it meanwhile
    return True


def _requeue(study: optuna.Study, trial: FrozenTrial, retries: int) -> bool:
    done = int(trial.user_attrs.get(RETRIES_ATTR, 0))
    if done >= retries:
        return False
    carried = {key: value for key, value in trial.user_attrs.items() if key.startswith(CARRIED_PREFIX)}
    study.enqueue_trial(trial.params, user_attrs={**carried, RETRY_OF_ATTR: trial.number, RETRIES_ATTR: done + 1})
    return True


def is_stale_failure(trial: FrozenTrial) -> bool:
    return trial.state == TrialState.FAIL and bool(trial.system_attrs.get(STALE_ATTR))


def finished_count(study: optuna.Study) -> int:
    """Trials that ran to their end: COMPLETE, PRUNED, and FAIL from the job itself (not stale)."""
    finished = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    return sum(1 for t in study.get_trials(deepcopy=False, states=finished) if not is_stale_failure(t))


STORAGE_CONFIG = CONF_DIR / "sweep_storage" / "journal.yaml"  # the sweeps' default storage


def default_storage(study: str) -> str:
    """The storage URL conf/sweep_storage/journal.yaml gives a sweep of this study."""
    sweeper = {"study_name": study, **OmegaConf.to_container(OmegaConf.load(STORAGE_CONFIG))}
    return str(OmegaConf.create({"hydra": {"sweeper": sweeper}}).hydra.sweeper.storage)


def open_study(name: str, url: str | None, base_dir: str) -> optuna.Study:
    """The Optuna study `name` in storage `url` (default: the sweeps' journal file for it); ConfigError in one
    line when there is none."""
    url = url or default_storage(name)
    path = storage_file(url, base_dir)
    if path is not None and not path.exists():
        raise ConfigError(f"no Optuna storage at {path} (run from the sweep's launch directory, or --storage)")
    try:
        storage = open_storage(url, base_dir, default_timeouts())
    except (*STORAGE_ERRORS, StorageFault) as error:
        raise ConfigError(f"cannot open Optuna storage {masked(url)} ({redacted(one_line(error), url)})") from None
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        raise ConfigError(f"no study {name!r} in {masked(url)}") from None
