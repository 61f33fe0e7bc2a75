"""One launch of a sweep: validate, join the study, run the workers, end the study (rookworld/sweep/sweeper.py)."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from hydra.core.singleton import Singleton
from hydra.types import HydraContext, TaskFunction
from hydra.utils import get_method
from omegaconf import DictConfig, OmegaConf
from optuna.distributions import CategoricalDistribution
from optuna.storages import BaseStorage
from optuna.trial import TrialState

from rookworld.app.config import load_sweeper, value_sources
from rookworld.interrupts import Interrupted, interrupts_unmasked
from rookworld.specs.inert import check_space_knobs_act
from rookworld.specs.rules import ConfigError, require
from rookworld.specs.sweep import Sweeper
from rookworld.sweep.storage.clock import StorageClock
from rookworld.sweep.job.context import ParentRef
from rookworld.sweep.running.gpus import worker_gpus, worker_threads
from rookworld.sweep.storage.lock import StorageFault, storage_lock
from rookworld.sweep.report.mlflow_parent import (SUMMARY_ARTIFACT_DIR, end_orphan_runs, finish_study_parent, study_parent_run,
                                           tracking_enabled)
from rookworld.sweep.running.mps import MpsDaemon, MpsUnavailable, mps_mode
from rookworld.sweep.running.space import SearchSpace, make_sampler
from rookworld.sweep.staged.stage_report import study_stage_report
from rookworld.sweep.staged.stages import VERDICT_ATTR, is_search
from rookworld.sweep.storage.storage_url import masked, redacted
from rookworld.sweep.storage.study import STORAGE_ERRORS, is_stale_failure, open_storage, resolve_stale_trials
from rookworld.sweep.report.summary import fetch_study_runs, summarise_study, summary_markdown
from rookworld.sweep.running.worker import (PARENT_PID_ENV, STORAGE_ENV, STORAGE_FAULT_EXIT, TOO_MANY_FAILURES_EXIT, TaskRef,
                                    WorkerSpec)
from rookworld.tracking import TrackingSettings, absolute_path, hydra_base_dir, one_line, open_store

log = logging.getLogger(__name__)
LAUNCHES_ATTR = "rookworld:launches"  # study user attr: how many sweep launches joined it
FIXED_ATTR = "rookworld:fixed"  # study user attr: the fixed overrides its first launch gave every trial (sorted)
SUMMARISED_ATTR = "rookworld:summarised"  # study user attr: the parent run its summary was logged on
STOP_GRACE_S = 30  # on Ctrl-C / SIGTERM, workers get this long to close their trials' runs before SIGKILL
WATCH_INTERVAL_S = 0.2  # how often the launch checks whether a worker ended
WORKERS_FAILED_EXIT = 1  # the sweep's exit status when a worker failed (reported by it) or died and was not replaced


class UserError(ValueError):
    """Bad input, reported in one line with exit code 2."""


@dataclass
class Launch:
    spec: WorkerSpec  # its storage URL masked
    url: str  # the storage URL, password and all
    gpus: list[str | None]
    threads: int
    parent: ParentRef | None
    log_scale: tuple[str, ...]
    mps: MpsDaemon | None
    created: Path | None = None  # the outermost folder made for the launch folder (removed if no worker runs)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    # ---------------------------------------------------------------- before any worker

    @classmethod
    def prepare(cls, config: DictConfig, context: HydraContext, task: TaskFunction, arguments: list[str],
                raw: dict[str, Any]) -> Launch:
        base_dir = hydra_base_dir()
        try:
            settings = load_sweeper(raw)
            space = SearchSpace.parse(settings.search_params(), arguments)
            probe = check_trial_configs(config, context, space, settings.validate)
            settings = check_stages(settings, probe)
            make_sampler(settings.sampler, 0, space)
            device = str(OmegaConf.select(probe, "device", default="cpu"))
            gpus = worker_gpus(settings.n_jobs, OmegaConf.select(probe, "trial.trials_per_gpu", default=1), device)
            mps = mps_mode(OmegaConf.select(probe, "trial.mps", default="off"))
        except ConfigError as error:
            raise UserError(str(error)) from error
        url = settings.storage
        storage = open_study_storage(settings, base_dir)
        check_direction(settings, storage)
        wanted = absolute_path(str(config.hydra.sweep.dir), base_dir)
        created = first_missing(wanted)  # removed again if the launch stops before its workers
        launch_dir = make_launch_dir(wanted)
        daemon = None
        try:
            daemon = MpsDaemon.for_workers(mps, gpus, launch_dir / ".sweep")
            tracking = open_tracking(config, settings, base_dir)  # a fresh store: created outside the study lock
            launch_number, parent = join_study(config, settings, storage, base_dir, tracking, launch_dir, space.fixed)
        except (UserError, MpsUnavailable) as error:
            if daemon is not None:
                daemon.stop()
            remove_launch_dir(launch_dir, created)
            if isinstance(error, MpsUnavailable):
                raise UserError(f"trial.mps=on: CUDA MPS unavailable ({error}); trial.mps=auto falls back to time "
                                "slicing") from error
            raise
        shown = dataclasses.replace(settings, storage=masked(url))
        spec = WorkerSpec(context, config, TaskRef.of(task), shown, space, str(launch_dir), launch_number, base_dir,
                          {"instances": Singleton.get_state()["instances"]})  # resolvers: re-registered there
        return cls(spec, url, gpus, worker_threads(len(gpus)), parent, space.log_scale(), daemon, created)

    # ---------------------------------------------------------------- the workers

    def run_workers(self) -> int:
        """Start the workers the study still needs, watch them (a dead one is replaced); the sweep's exit code.
        The MPS daemon, if any, is stopped at the end. A study already complete starts none and keeps no folder."""
        study = self.load_study()
        needed = min(len(self.gpus), self.trials_left(study))
        if not needed and not study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if self.mps is not None:
                self.mps.stop()
            remove_launch_dir(Path(self.spec.launch_dir), self.created)
            print(f"study {study.study_name} is already complete: {len(study.trials)} trials, none to start "
                  f"(a larger hydra.sweeper.n_trials extends it); its summary:", flush=True)
            return 0
        control = Path(self.spec.launch_dir) / ".sweep"
        spec_path = control / "worker_spec.pkl"
        with os.fdopen(os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as handle:
            pickle.dump(self.spec, handle)
        mps = self.mps
        (control / "launch.json").write_text(json.dumps({"start": time.time(), "workers": needed, "gpus": self.gpus[:needed],
                                                         "launch": self.spec.launch, "pid": os.getpid(),
                                                         "mps": mps.pipe_dir if mps else None}))
        log.info("study %s: %d workers in %s", self.spec.settings.study_name, needed, self.spec.launch_dir)
        try:
            slots = {slot: self.start_worker(slot, spec_path, mps) for slot in range(needed)}
            return self.wait(slots, spec_path, mps)
        finally:
            if mps is not None:
                mps.stop()

    def start_worker(self, slot: int, spec_path: Path, mps: MpsDaemon | None) -> subprocess.Popen[bytes]:
        """Worker number len(self.workers) (its seed and timeline), on GPU slot `slot`."""
        env = {**os.environ, PARENT_PID_ENV: str(os.getpid()), STORAGE_ENV: self.url, **(mps.env() if mps else {})}
        env.setdefault("OMP_NUM_THREADS", str(self.threads))
        if self.gpus[slot] is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpus[slot]
        worker = subprocess.Popen([sys.executable, "-m", "rookworld.sweep.running.run_worker", str(spec_path),
                                   str(len(self.workers))], env=env)
        self.workers.append(worker)
        return worker

    def trials_left(self, study: optuna.Study | None = None) -> int:
        """Trials the study still needs started (`study`: one already loaded); a staged sweep without its
        verdict needs a worker per slot (its race and confirmation runs are made as the stages go)."""
        return work_left(study or self.load_study(), self.spec.settings, len(self.gpus))

    def wait(self, slots: dict[int, subprocess.Popen[bytes]], spec_path: Path, mps: MpsDaemon | None) -> int:
        try:
            with interrupts_unmasked():
                return self.watch(slots, spec_path, mps)
        except Interrupted as stop:
            self.stop_workers(stop.signum)  # the same signal: their runs' stop reason names it
            self.close_stopped_trials()
            if self.spec.settings.stages is not None:  # what the stages have so far (the same command goes on)
                print(self.stage_report(self.load_study())[0], flush=True)
            raise

    def watch(self, slots: dict[int, subprocess.Popen[bytes]], spec_path: Path, mps: MpsDaemon | None) -> int:
        """Wait for every worker, noticing each end at once: a worker that died has its trial failed and
        re-queued (stale_retries) and is replaced while trials are left (max_worker_restarts)."""
        restarts, unreplaced, failed = 0, [], False
        while slots:
            ended = {slot: worker for slot, worker in slots.items() if worker.poll() is not None}
            if not ended:
                time.sleep(WATCH_INTERVAL_S)
                continue
            for slot, worker in ended.items():
                del slots[slot]
                number, code = self.workers.index(worker), worker.returncode
                if code in (0, TOO_MANY_FAILURES_EXIT, STORAGE_FAULT_EXIT):  # the latter two reported it
                    failed |= code != 0
                    continue
                what = f"sweep worker {number} (pid {worker.pid}) {_death(code)}"
                requeued = self.fail_trials_of_dead_workers()
                if restarts < self.spec.settings.max_worker_restarts and self.trials_left() > 0:
                    restarts += 1
                    slots[slot] = self.start_worker(slot, spec_path, mps)
                    print(f"rookworld: {what}{requeued}; worker {len(self.workers) - 1} started in its place",
                          file=sys.stderr, flush=True)
                elif self.trials_left() > 0:
                    unreplaced.append(f"{what}{requeued}; not replaced (hydra.sweeper.max_worker_restarts="
                                      f"{self.spec.settings.max_worker_restarts} reached)")
                else:
                    print(f"rookworld: {what}{requeued}; no trial left to start, not replaced", file=sys.stderr,
                          flush=True)
        for message in unreplaced:
            print(f"rookworld: error: {message}: run the same command again to finish the study", file=sys.stderr,
                  flush=True)
        return WORKERS_FAILED_EXIT if failed or unreplaced else 0

    def fail_trials_of_dead_workers(self) -> str:
        """Under the lock: fail (and re-queue) the trials whose worker is gone; what happened, for the message."""
        s = self.spec.settings
        study = self.load_study()
        clock = StorageClock(self.url, self.spec.base_dir, s.timeouts.connect_args())
        with storage_lock(self.url, self.spec.base_dir, f"study:{s.study_name}", s.timeouts):
            stale = resolve_stale_trials(study, self.storage, s.grace_period_s, s.stale_retries, clock)
        return "".join(f": its trial {t.number} failed" + (" and re-queued" if t.retried else
                                                            f" (not re-queued: hydra.sweeper.stale_retries={s.stale_retries})")
                       for t in stale)

    def close_stopped_trials(self) -> None:
        """After the workers stopped: their trials failed as stale (and re-queued); when no trial of the study runs
        any more (no other launch works it), its runs still open and the parent run end KILLED (the same command
        reopens the parent)."""
        self.fail_trials_of_dead_workers()
        if self.parent is None or self.load_study().get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            return
        client = self.tracking_client()
        end_orphan_runs(client, self.parent.experiment_id, self.load_study())
        client.set_terminated(self.parent.run_id, status="KILLED")

    def stop_workers(self, signum: int = signal.SIGINT) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signum)
        deadline = time.monotonic() + STOP_GRACE_S
        for worker in self.workers:
            try:
                worker.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()

    # ---------------------------------------------------------------- after them

    @functools.cached_property
    def storage(self) -> BaseStorage:
        return open_storage(self.url, self.spec.base_dir, self.spec.settings.timeouts)

    def load_study(self) -> optuna.Study:
        return optuna.load_study(study_name=self.spec.settings.study_name, storage=self.storage)

    def finish(self) -> None:
        """Print the study's summary, after a staged sweep's report (it leads with its verdict); if no trial runs
        any more, log both on the parent run and end that (once: the launch that claims it under the lock
        summarises, outside the lock)."""
        settings = self.spec.settings
        study = self.load_study()
        study.get_trials(deepcopy=False)  # the bulk of the reading, outside the lock
        with storage_lock(self.url, self.spec.base_dir, f"study:{settings.study_name}", settings.timeouts):
            running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            left = self.trials_left(study)
            claimed = not running and not left and self.parent is not None and \
                study.user_attrs.get(SUMMARISED_ATTR) != self.parent.run_id
            if claimed:
                study.set_user_attr(SUMMARISED_ATTR, self.parent.run_id)
        report, client = self.stage_report(study), self.tracking_client() if claimed else None
        if claimed:  # else no tracking, or another launch (or an earlier run of this command) summarised it
            assert self.parent is not None
            if report is not None:
                log_stage_report(client, self.parent.run_id, *report)
            finish_study_parent(client, self.parent, study, int(self.spec.config.tracking.summary_top_k), self.log_scale)
        if report is not None:
            print(report[0], flush=True)
        if running or left:
            print(summary_markdown(summarise_study(study)), flush=True)
            print(f"study {study.study_name}: {len(running)} trials still running, {left} to start "
                  "(other workers, or run the same command again); its MLflow parent run stays open", flush=True)
            return
        print(summary_markdown(self.summary(study, client)), flush=True)
        if claimed:
            log.info("study %s finished: MLflow parent run %s ended", study.study_name, self.parent.run_id)

    def tracking_client(self) -> Any:
        return open_store(TrackingSettings.from_config(self.spec.config.tracking, self.spec.base_dir))

    def summary(self, study: optuna.Study, client: Any = None) -> Any:
        """The study's summary, joined with its trials' MLflow runs where the sweep tracks them."""
        if self.parent is None:
            return summarise_study(study)
        client = client or self.tracking_client()
        return summarise_study(study, fetch_study_runs(client, self.parent.experiment_id, study.study_name))

    def stage_report(self, study: optuna.Study) -> tuple[str, list[Any]] | None:
        """A staged sweep's report (rookworld/sweep/staged/stage_report.py); None for a sweep without stages."""
        settings = self.spec.settings
        if settings.stages is None:
            return None
        return study_stage_report(study, settings.stages, settings.n_trials, self.spec.config,
                                  lambda baseline, other: config_differences(self.spec, baseline, other))


def _death(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


# ---------------------------------------------------------------- stages


def work_left(study: optuna.Study, settings: Sweeper, slots: int) -> int:
    """Search trials still to start; a staged sweep without its verdict: at least `slots`."""
    trials = study.get_trials(deepcopy=False)
    counted = sum(is_search(t) and t.state != TrialState.WAITING and not is_stale_failure(t) for t in trials)
    left = max(0, settings.n_trials - counted)
    if settings.stages is not None and study.user_attrs.get(VERDICT_ATTR) is None:
        return max(left, slots)
    return left


def check_stages(settings: Sweeper, probe: DictConfig) -> Sweeper:
    """A staged sweep's knobs against the trial config: its rungs end at `steps`, its jobs report nothing."""
    if settings.stages is None:
        return settings
    hooks = list(probe.trial.hooks)
    require(not hooks, "trial.hooks", hooks, "a staged sweep's jobs report nothing to Optuna themselves (the worker "
            "reports each rung's seed mean): use trial=stages")
    check_position_blocks(settings.stages, probe)
    return dataclasses.replace(settings, stages=settings.stages.with_horizon(probe.steps))


def check_position_blocks(stages: Any, probe: DictConfig) -> None:
    """The trial's data holds the confirmation's pool (hydra.sweeper.stages.confirm.pool), and with
    eval.draw=blocks each part holds a block for every seed scored on it (the race's on validation, the
    confirmation's on its pool): a block seen by two seeds would share its position term between them."""
    from rookworld.run.build import heldout_problems
    from rookworld.stats.blocks import game_blocks
    from rookworld.app.config import load_run

    spec = load_run(probe)
    pool = stages.confirm.pool
    try:
        confirming = heldout_problems(pool, spec.data)
    except ValueError as error:
        raise ConfigError(f"hydra.sweeper.stages.confirm.pool={pool}: {error}") from None
    if probe.eval.draw != "blocks":
        return
    parts = {"validation": heldout_problems("validation", spec.data), pool: confirming}
    for split, seeds, stage in (("validation", stages.race.max_seeds, "race.max_seeds"),
                                (pool, stages.confirm.seeds, "confirm.seeds")):
        for task, problems in zip(("policy", "arbiter"), parts[split]):
            size = int(probe.eval[f"num_{task}"])
            blocks = len(game_blocks([p.game for p in problems], size)) if size else seeds
            require(blocks >= seeds, f"eval.num_{task}", size, f"the {split} part ({len(problems)}) holds {blocks} "
                    f"blocks of it, hydra.sweeper.stages.{stage} = {seeds} seeds need one each (eval.draw=blocks)")


def config_differences(spec: WorkerSpec, baseline: Any, other: Any) -> dict[str, tuple]:
    """The composed trial configs of two configurations (override lists), compared: the keys that differ."""
    from rookworld.run.resume import differences

    def composed(overrides: Any) -> dict[str, Any]:
        return _plain(spec.hydra_context.config_loader.load_sweep_config(spec.config, [*spec.space.fixed, *overrides]))

    return differences(composed(baseline), composed(other))


def log_stage_report(client: Any, run_id: str, markdown: str, checks: list[Any]) -> None:
    """The stage report and its fidelity plot on the parent run (sweep_summary/)."""
    import tempfile

    from rookworld.sweep.report.plots import fidelity_figure

    client.log_text(run_id, markdown, f"{SUMMARY_ARTIFACT_DIR}/stages.md")
    if checks:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "fidelity.png"
            fidelity_figure(checks).savefig(path)
            client.log_artifact(run_id, str(path), SUMMARY_ARTIFACT_DIR)


# ---------------------------------------------------------------- validation


def check_trial_configs(config: DictConfig, context: HydraContext, space: SearchSpace,
                        validate: str | None) -> DictConfig:
    """Compose the trial config for each probe of the search space and `validate` it (rookworld.app.config.validate:
    the typed specs check every value's type and rule)."""
    probes = [compose_trial(config, context, space, params) for params in space.probes()]
    check_swept_dimensions(config, context, space, probes)
    if validate:
        check = get_method(validate)
        for probe in probes:
            try:
                check(probe)
            except ConfigError:
                raise
            except Exception as error:  # a check that tripped over a value it did not expect
                raise ConfigError(f"trial config: {one_line(error)} (from {validate})") from error
    return probes[0]


def compose_trial(config: DictConfig, context: HydraContext, space: SearchSpace, params: dict[str, Any]) -> DictConfig:
    """The trial config of one param set (Hydra's composition errors as one line)."""
    try:
        return context.config_loader.load_sweep_config(config, [*space.overrides(params), "trial.number=0"])
    except Exception as error:  # Hydra's composition errors: a key that does not exist, a bad value
        swept = " ".join(f"{k}={v}" for k, v in params.items())
        raise ConfigError(f"{' '.join(space.fixed)} {swept}: {one_line(error)}".strip()) from error


def check_swept_dimensions(config: DictConfig, context: HydraContext, space: SearchSpace,
                           probes: list[DictConfig]) -> None:
    """No silent dimension: every swept key's value reaches the trial config, the choices of a swept config
    group compose different trial configs (keys a preset lays over a group win over its choice), and no knob
    the sweep searches or fixes is one that the trial's other settings switch off (rookworld/specs/inert.py)."""
    preset = f"sweeps={OmegaConf.select(config, 'hydra.runtime.choices.sweeps', default=None)}"
    for probe, params in zip(probes, space.probes()):
        groups = probe.hydra.runtime.choices
        for key, value in params.items():
            reached = groups.get(key) if key in groups else OmegaConf.select(probe, key, default="<absent>")
            require(reached == value, f"{preset}: hydra.sweeper.params.{key}", value,
                    f"the swept value does not reach the trial config (it composes {key}={reached})")
    for key, distribution in space.distributions.items():
        if key not in probes[0].hydra.runtime.choices or not isinstance(distribution, CategoricalDistribution):
            continue
        composed: dict[str, Any] = {}
        for choice in distribution.choices:
            plain = _plain(compose_trial(config, context, space, {**space.probes()[0], key: choice}))
            same = [other for other, seen in composed.items() if seen == plain]
            if same:
                choices = ", ".join(map(str, distribution.choices))
                raise ConfigError(f"{preset}: hydra.sweeper.params.{key}=choice({choices}): "
                                  f"choices {same[0]} and {choice} compose the same trial config (keys laid over the "
                                  f"group win over its choice: set its default with `override /{key}: ...` in the defaults)")
            composed[str(choice)] = plain
    sources = value_sources(context.config_loader, space.fixed, str(config.hydra.job.config_name))
    check_space_knobs_act(space.takes(), probes[0], sources, preset)


def _plain(trial: DictConfig) -> dict[str, Any]:
    """A composed trial config as plain data (unresolved), its hydra node left out."""
    plain = OmegaConf.to_container(trial, resolve=False)
    assert isinstance(plain, dict)
    plain.pop("hydra", None)
    return plain


def first_missing(path: Path) -> Path | None:
    """The outermost folder of `path` that does not exist yet (None: it exists)."""
    missing = None
    while not path.exists():
        missing, path = path, path.parent
    return missing


def remove_launch_dir(launch_dir: Path, created: Path | None) -> None:
    """Remove a launch folder that never ran a worker, and the empty folders made for it up to `created` (a
    folder another launch put something in meanwhile stays)."""
    shutil.rmtree(launch_dir, ignore_errors=True)
    folder = launch_dir.parent
    while created is not None and created in (folder, *folder.parents):
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def make_launch_dir(wanted: Path) -> Path:
    """`wanted`, or `wanted_1`, `wanted_2`, ... if another launch took it (mkdir is atomic)."""
    try:
        wanted.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(1000):
            path = wanted if attempt == 0 else wanted.with_name(f"{wanted.name}_{attempt}")
            try:
                path.mkdir()
            except FileExistsError:
                continue
            (path / ".sweep").mkdir()
            return path
    except OSError as error:
        raise UserError(f"hydra.sweep.dir={str(wanted)!r}: cannot create the launch folder ({one_line(error)})") from error
    raise UserError(f"hydra.sweep.dir={str(wanted)!r}: 1000 launch folders of that name exist already")


# ---------------------------------------------------------------- the study


def open_study_storage(settings: Sweeper, base_dir: str) -> BaseStorage:
    try:
        return open_storage(settings.storage, base_dir, settings.timeouts)
    except (*STORAGE_ERRORS, StorageFault) as error:
        raise UserError(f"hydra.sweeper.storage={masked(settings.storage)!r}: cannot open the Optuna storage "
                        f"({redacted(one_line(error), settings.storage)})") from error


def open_tracking(config: DictConfig, settings: Sweeper, base_dir: str) -> tuple[Any, Any] | None:
    """(client, settings) of the MLflow store, opened; None when tracking is off. A fresh store is created (its
    migrations run) under a lock of its own, not the study's: launches started at once do not race on it."""
    if not tracking_enabled(config):
        return None
    try:
        tracking = TrackingSettings.from_config(config.tracking, base_dir)
        with storage_lock(settings.storage, base_dir, "tracking-store", settings.timeouts):
            return open_store(tracking), tracking
    except Exception as error:  # the tracking store: unreachable, unwritable, a bad URI
        raise UserError(f"tracking.uri={config.tracking.uri!r}: cannot open the tracking store for the sweep's MLflow "
                        f"parent run ({one_line(error)})") from error


def check_direction(settings: Sweeper, storage: BaseStorage) -> None:
    """An existing study must have the sweep's direction (checked again under the lock, for a study created meanwhile)."""
    try:
        study = optuna.load_study(study_name=settings.study_name, storage=storage)
    except KeyError:
        return
    if study.direction.name.lower() != settings.direction:
        raise UserError(f"hydra.sweeper.direction={settings.direction!r}: study {settings.study_name!r} exists "
                        f"with direction {study.direction.name.lower()} (another study_name starts a new one)")


def check_fixed_settings(study: optuna.Study, fixed: tuple[str, ...]) -> None:
    """Every launch of a study gives its trials the same fixed overrides (a study compares its trials): the first
    launch's are stored, a launch with others is refused (another study_name starts a new study)."""
    stored, given = study.user_attrs.get(FIXED_ATTR), sorted(fixed)
    if stored is None:
        study.set_user_attr(FIXED_ATTR, given)
        return
    if stored != given:
        added, dropped = [o for o in given if o not in stored], [o for o in stored if o not in given]
        raise UserError(f"{' '.join(added) or 'the fixed overrides'}: study {study.study_name!r} ran its trials with "
                        f"{' '.join(stored) or 'no fixed override'}{' (this launch has no ' + ' '.join(dropped) + ')' if dropped else ''}"
                        f": give the same to join it, hydra.sweeper.study_name=NEW for a new study (or "
                        f"hydra.sweeper.accept_fixed_changes=true)")


def join_study(config: DictConfig, settings: Sweeper, storage: BaseStorage, base_dir: str,
               tracking: tuple[Any, Any] | None, launch_dir: Path, fixed: tuple[str, ...]) -> tuple[int, ParentRef | None]:
    """Under the study's lock: create or load it, check its fixed overrides, number this launch, fail stale
    trials, get the parent run."""
    clock = StorageClock(settings.storage, base_dir, settings.timeouts.connect_args())
    with storage_lock(settings.storage, base_dir, f"study:{settings.study_name}", settings.timeouts):
        study = optuna.create_study(study_name=settings.study_name, storage=storage, direction=settings.direction,
                                    load_if_exists=True)
        check_direction(settings, storage)
        if not settings.accept_fixed_changes:
            check_fixed_settings(study, fixed)
        launch = int(study.user_attrs.get(LAUNCHES_ATTR, 0))
        study.set_user_attr(LAUNCHES_ATTR, launch + 1)
        resolve_stale_trials(study, storage, settings.grace_period_s, settings.stale_retries, clock)
        if tracking is None:
            return launch, None
        done = not work_left(study, settings, 1) and not study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        summarised = bool(study.user_attrs.get(SUMMARISED_ATTR))
        if summarised and not done:
            study.set_user_attr(SUMMARISED_ATTR, None)  # extended (a larger n_trials): summarised again at its end
        client, tracking_settings = tracking
        try:
            parent = study_parent_run(client, tracking_settings, config, study, launch_dir,
                                      reopen=not (done and summarised))
        except Exception as error:  # the tracking store failed under us
            raise UserError(f"tracking.uri={config.tracking.uri!r}: cannot start the sweep's MLflow parent run "
                            f"({one_line(error)})") from error
    end_orphan_runs(client, parent.experiment_id, study)
    return launch, parent
