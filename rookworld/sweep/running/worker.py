"""A sweep worker: one long-lived process (`python -m rookworld.sweep.running.run_worker SPEC INDEX`, one per
GPU slot) that asks, runs and tells trials of the shared study until it holds `n_trials` (docs/sweeps.md,
How it runs). SPEC is the sweep the launch pickled (WorkerSpec). Asks happen under the study's lock; a job runs
in this process as a Hydra job in `trial_N/`; a trial its job pruned stays PRUNED. Worker INDEX of launch L
seeds its sampler `seed + 10000 x L + INDEX`, so no two workers on any machine draw alike. It dies with the
launch (PR_SET_PDEATHSIG and a parent-pid check) and writes its timeline to `.sweep/worker_<INDEX>.jsonl`.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import inspect
import json
import logging
import os
import signal
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from hydra.core.utils import JobReturn, JobStatus, configure_log, run_job
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict
from optuna.trial import TrialState

from rookworld.specs.sweep import Sweeper
from rookworld.sweep.storage.clock import StorageClock
from rookworld.sweep.storage.host import host_id
from rookworld.sweep.storage.lock import storage_lock
from rookworld.sweep.staged.rungs import ItemResult, ItemRun
from rookworld.sweep.running.space import SearchSpace, make_sampler
from rookworld.sweep.staged.stages import (PROBLEMS_ATTR, SEARCH, SCORES_ATTR, SECONDS_ATTR, VERDICT_ATTR, Item, StageView,
                                    due, halving_report, is_search)
from rookworld.sweep.storage.study import (FAIL_REASON_ATTR, GPU_ATTR, OBJECTIVE_SE_ATTR, OUTCOME_ATTR, Heartbeat,
                                           is_stale_failure, open_storage, resolve_stale_trials, trial_id)
from rookworld.tracking import absolute_path, one_line

log = logging.getLogger(__name__)

PARENT_PID_ENV = "ROOKWORLD_SWEEP_PARENT"
STORAGE_ENV = "ROOKWORLD_SWEEP_STORAGE"  # the storage URL, password and all (the stored spec holds it masked)
SEED_STRIDE = 10_000  # seed offset between launches; workers of one launch take offsets 0, 1, ...
TOO_MANY_FAILURES_EXIT = 3
STORAGE_FAULT_EXIT = 4  # the storage failed (a timeout, a full disk): reported in one line
_PR_SET_PDEATHSIG = 1
WAIT = "wait"  # ask(): nothing to start now, but running trials may make work for the next stage
WAIT_INTERVAL_S = 1.0  # how often a worker with nothing to start asks again


@dataclass
class WorkerSpec:
    """Everything a worker needs, written once by the sweeper."""

    hydra_context: HydraContext
    config: DictConfig
    task: TaskRef
    settings: Sweeper
    space: SearchSpace
    launch_dir: str
    launch: int
    base_dir: str
    singletons: dict[Any, Any]  # Hydra's singletons (job name, config store), as its joblib launcher passes them


class TooManyFailures(RuntimeError):
    pass


@dataclass(frozen=True)
class TaskRef:
    """The @hydra.main function of the sweep: its module (or the script's file when it ran as a script)."""

    module: str | None
    path: str | None
    qualname: str

    @classmethod
    def of(cls, task: TaskFunction) -> TaskRef:
        module = sys.modules[task.__module__]
        if task.__module__ != "__main__":
            return cls(task.__module__, None, task.__qualname__)
        spec = getattr(module, "__spec__", None)  # `python -m package.module`: its import name
        return cls(spec.name if spec is not None else None, getattr(module, "__file__", None), task.__qualname__)

    def load(self) -> TaskFunction:
        if self.module is not None:
            module = importlib.import_module(self.module)
        else:
            assert self.path is not None, "the sweep's task function has neither a module nor a file"
            spec = importlib.util.spec_from_file_location("__rookworld_task__", self.path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)  # its main guard does not run (not run as __main__)
        return inspect.unwrap(getattr(module, self.qualname))  # the function under @hydra.main


def die_with_parent(parent_pid: int) -> None:
    """Exit as soon as the sweeper does, however it ends (even SIGKILL)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # it died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="rookworld-parent-watch", daemon=True).start()


class LabelledLines:
    """A text stream that starts every line it passes on to `stream` with `label`."""

    def __init__(self, stream: Any, label: str) -> None:
        self.stream, self.label, self.at_line_start = stream, label, True

    def write(self, text: str) -> int:
        pieces = []
        for piece in text.splitlines(keepends=True):
            pieces.append(self.label + piece if self.at_line_start else piece)
            self.at_line_start = piece.endswith("\n")
        self.stream.write("".join(pieces))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding: the stream's own
        return getattr(self.stream, name)


def worker_gpu() -> str:
    """This worker's GPU as the study names it: its host and CUDA_VISIBLE_DEVICES (none: not pinned, as on the CPU)."""
    return f"{host_id()} GPU {os.environ.get('CUDA_VISIBLE_DEVICES', 'none')}"


class Worker:
    def __init__(self, spec: WorkerSpec, index: int, url: str) -> None:
        self.spec, self.index, self.url = spec, index, url
        self.task_function = spec.task.load()
        settings = spec.settings
        self.storage = open_storage(url, spec.base_dir, settings.timeouts)
        sampler = make_sampler(settings.sampler, SEED_STRIDE * spec.launch + index, spec.space)
        self.study = optuna.load_study(study_name=settings.study_name, storage=self.storage, sampler=sampler)
        self.clock = StorageClock(url, spec.base_dir, settings.timeouts.connect_args())
        self.heartbeat = Heartbeat(self.storage, settings.heartbeat_interval_s, self.clock)
        self._timeline = open(Path(spec.launch_dir) / ".sweep" / f"worker_{index}.jsonl", "a", buffering=1)

    def event(self, name: str, **fields: Any) -> None:
        self._timeline.write(json.dumps({"event": name, "t": time.time(), "worker": self.index, **fields}) + "\n")

    def run(self) -> int:
        self.event("ready", pid=os.getpid(), gpu=os.environ.get("CUDA_VISIBLE_DEVICES"),
                   mps=os.environ.get("CUDA_MPS_PIPE_DIRECTORY"))
        with self.heartbeat:
            while True:
                try:
                    trial = self.ask()
                except TooManyFailures as error:
                    print(f"rookworld: error: {error}", file=sys.stderr, flush=True)
                    return TOO_MANY_FAILURES_EXIT
                if trial is None:
                    self.event("done")
                    return 0
                if trial == WAIT:
                    time.sleep(WAIT_INTERVAL_S)
                    continue
                self.event("start", trial=trial.number)
                trial.set_user_attr(GPU_ATTR, worker_gpu())
                if self.spec.settings.stages is not None:
                    state = self.run_staged(trial)
                else:
                    state = self.tell(trial, self.run_job([*self.spec.space.overrides(trial.params),
                                                           f"trial.number={trial.number}",
                                                           f"hydra.sweep.dir='{self.spec.launch_dir}'"], trial.number))
                self.event("end", trial=trial.number, state=state)

    # ---------------------------------------------------------------- ask

    def ask(self) -> Any:
        """The next trial of the study; None when it has its n_trials (and, staged, its verdict); WAIT when
        a staged sweep's next stage waits for running trials."""
        s = self.spec.settings
        self.study.get_trials(deepcopy=False)  # reads the study's news outside the lock: under it, only what is newer
        with storage_lock(self.url, self.spec.base_dir, f"study:{s.study_name}", s.timeouts):
            resolve_stale_trials(self.study, self.storage, s.grace_period_s, s.stale_retries, self.clock)
            trials = self.study.get_trials(deepcopy=False)
            if s.stages is not None:
                trials = self.enqueue_due(trials)
            counted = [t for t in trials if is_search(t) and t.state != TrialState.WAITING and not is_stale_failure(t)]
            waiting = s.stages is not None and any(t.state == TrialState.WAITING for t in trials)
            if len(counted) >= s.n_trials and not waiting:
                if s.stages is not None and any(t.state == TrialState.RUNNING for t in trials):
                    return WAIT
                return None
            finished = [t for t in counted if t.state.is_finished()]
            failed = sum(t.state == TrialState.FAIL for t in finished)
            if len(finished) >= s.n_jobs and failed / len(finished) > s.max_failure_rate:
                raise TooManyFailures(f"hydra.sweeper.max_failure_rate={s.max_failure_rate}: {failed} of "
                                      f"{len(finished)} finished trials failed (see their fail_reason): stopping")
            if s.stages is None:
                trial = self.study.ask(fixed_distributions=self.spec.space.distributions)
                self.heartbeat.own(trial_id(self.storage, s.study_name, trial.number))
            else:
                trial = self.ask_staged()
        return trial

    # ---------------------------------------------------------------- a staged sweep (rookworld/sweep/staged/stages.py)

    def enqueue_due(self, trials: list[Any]) -> list[Any]:
        """Under the lock: enqueue the runs the stages need next, store the verdict once it is in; the trials."""
        stages = self.spec.settings.stages
        assert stages is not None
        view = StageView.of(trials, stages, self.spec.settings.n_trials)
        items, verdict = due(view)
        for item in items:
            self.study.enqueue_trial({}, user_attrs=item.attrs())
        if verdict is not None and self.study.user_attrs.get(VERDICT_ATTR) is None:
            self.study.set_user_attr(VERDICT_ATTR, verdict)
        return self.study.get_trials(deepcopy=False) if items else trials

    def ask_staged(self) -> Any:
        """The next trial: an enqueued run first (the baseline, a race or confirmation run, a retry), else a
        new search configuration with its params sampled."""
        stages = self.spec.settings.stages
        assert stages is not None
        trial = self.study.ask()
        self.heartbeat.own(trial_id(self.storage, self.spec.settings.study_name, trial.number))
        item = Item.of(trial)
        if item is None or (item.stage == SEARCH and not item.baseline):
            params = self.spec.space.suggest(trial)
        if item is None:
            item = Item(SEARCH, str(trial.number), tuple(self.spec.space.param_overrides(params)), stages.search_seeds())
            for key, value in item.attrs().items():
                trial.set_user_attr(key, value)
        return trial

    def run_staged(self, trial: Any) -> str:
        """Run a staged trial's segments (rookworld/sweep/staged/rungs.py) and tell how it ended."""
        stages, s = self.spec.settings.stages, self.spec.settings
        assert stages is not None and stages.rungs is not None
        bound = trial_id(self.storage, s.study_name, trial.number)
        item = Item.of(self.storage.get_trial(bound))
        assert item is not None

        def run_job(overrides: list[str], subdir: str) -> JobReturn:
            return self.run_job([*self.spec.space.fixed, *overrides, f"trial.number={trial.number}",
                                 f"hydra.sweep.dir='{self.spec.launch_dir}'",
                                 f"hydra.sweep.subdir=trial_{trial.number}/{subdir}"], trial.number)

        def record(result: ItemResult) -> None:
            self.storage.set_trial_user_attr(bound, SCORES_ATTR, result.scores)
            self.storage.set_trial_user_attr(bound, SECONDS_ATTR, result.seconds)
            if result.problems:
                self.storage.set_trial_user_attr(bound, PROBLEMS_ATTR, result.problems)

        root = Path(absolute_path(stages.checkpoint_dir, self.spec.base_dir))
        penalty = float(self.spec.config.objective.failure_penalty)
        report = halving_report(trial, stages.eta)
        result = ItemRun(item, stages, root, penalty, run_job, report, record, _job_error).run()
        if result.failure is not None:
            return self._fail(trial, bound, result.failure)
        if result.objective is None:
            return self._tell(trial, bound, state=TrialState.PRUNED)
        self.storage.set_trial_user_attr(bound, OUTCOME_ATTR, result.outcome)
        final = [score for rung, _, score in result.scores if rung == stages.horizon]
        if len(final) >= 2:  # the standard error of the seeds' mean
            self.storage.set_trial_user_attr(bound, OBJECTIVE_SE_ATTR, statistics.stdev(final) / len(final) ** 0.5)
        return self._tell(trial, bound, values=result.objective)

    # ---------------------------------------------------------------- run

    def run_job(self, overrides: list[str], number: int) -> JobReturn:
        """One Hydra job of the sweep's task with these overrides, in this process."""
        spec = self.spec
        config = spec.hydra_context.config_loader.load_sweep_config(spec.config, overrides)
        with open_dict(config):
            config.hydra.job.id = str(number)
            config.hydra.job.num = number
        label = f"[trial {number}] "  # the workers' lines interleave on one terminal
        try:
            with contextlib.redirect_stdout(LabelledLines(sys.stdout, label)), \
                    contextlib.redirect_stderr(LabelledLines(sys.stderr, label)):
                return run_job(hydra_context=spec.hydra_context, task_function=self.task_function, config=config,
                               job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
        finally:
            configure_log(spec.config.hydra.hydra_logging, spec.config.hydra.verbose,
                          execution_whitelist=spec.hydra_context.execution_whitelist)

    # ---------------------------------------------------------------- tell

    def tell(self, trial: Any, job: JobReturn) -> str:
        """COMPLETE with the objective the job returned (a RunResult's; its outcome and the objective's standard
        error become user attrs), else FAIL with why (fail_reason); a trial its job pruned stays PRUNED."""
        bound = trial_id(self.storage, self.spec.settings.study_name, trial.number)
        if self.storage.get_trial(bound).state.is_finished():  # its job pruned it
            return self.storage.get_trial(bound).state.name
        if job.status != JobStatus.COMPLETED:
            return self._fail(trial, bound, _job_error(job))
        returned = job.return_value
        outcome = getattr(returned, "outcome", None)
        if outcome is not None:
            self.storage.set_trial_user_attr(bound, OUTCOME_ATTR, str(outcome))
        se = getattr(returned, "objective_se", None)
        if se is not None:
            self.storage.set_trial_user_attr(bound, OBJECTIVE_SE_ATTR, float(se))
        try:
            value = float(getattr(returned, "objective", returned))
        except (TypeError, ValueError):
            return self._fail(trial, bound, f"the task returned {returned!r}, not a float objective")
        return self._tell(trial, bound, values=value)

    def _fail(self, trial: Any, bound: int, reason: str) -> str:
        log.warning("trial %d failed: %s", trial.number, reason)
        self.storage.set_trial_user_attr(bound, FAIL_REASON_ATTR, reason)
        return self._tell(trial, bound, state=TrialState.FAIL)

    def _tell(self, trial: Any, bound: int, **result: Any) -> str:
        try:
            self.study.tell(trial, skip_if_finished=True, **result)
        except RuntimeError as error:  # the grid sampler calls study.stop() once its grid is done; told anyway
            if "Study.stop" not in str(error):
                raise
        return self.storage.get_trial(bound).state.name


def _job_error(job: JobReturn) -> str:
    try:
        _ = job.return_value  # a FAILED job's return_value raises its exception
    except Exception as error:  # noqa: BLE001 - recorded, not handled
        return one_line(error)
    return "the job failed without an exception"
