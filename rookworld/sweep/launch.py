"""One launch of a sweep: validate, join the study, run the workers, end the study (rookworld/sweep/sweeper.py)."""

from __future__ import annotations

import json
import logging
import os
import pickle
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, ListConfig, OmegaConf

from rookworld.config import ConfigError
from rookworld.interrupts import Interrupted
from rookworld.sweep.settings import SweepSettings
from rookworld.sweep.space import SearchSpace
from rookworld.sweep.context import ParentRef, write_parent_ref
from rookworld.tracking import absolute_path, hydra_base_dir, one_line

log = logging.getLogger(__name__)
LAUNCHES_ATTR = "rookworld:launches"  # study user attr: how many sweep launches joined it
STOP_GRACE_S = 30  # on Ctrl-C / SIGTERM, workers get this long to close their trials' runs before SIGKILL
_ABSENT = object()


class UserError(ValueError):
    """Bad input, reported in one line with exit code 2."""


@dataclass
class Launch:
    spec: Any  # rookworld.sweep.worker.WorkerSpec
    gpus: list[str | None]
    threads: int
    parent: ParentRef | None
    log_scale: tuple[str, ...]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    # ---------------------------------------------------------------- before any worker

    @classmethod
    def prepare(cls, config: DictConfig, context: HydraContext, task: TaskFunction, arguments: list[str],
                raw: dict[str, Any]) -> Launch:
        from rookworld.sweep.gpus import worker_gpus, worker_threads
        from rookworld.sweep.space import make_sampler
        from rookworld.sweep.study import STORAGE_ERRORS, open_storage
        from rookworld.sweep.worker import TaskRef, WorkerSpec

        base_dir = hydra_base_dir()
        try:
            settings = SweepSettings.parse(raw)
            space = SearchSpace.parse(settings.params, arguments)
            probe = check_trial_configs(config, context, space, settings.validate)
            make_sampler(settings.sampler, 0, space)
            device = str(OmegaConf.select(probe, "device", default="cpu"))
            gpus = worker_gpus(settings.n_jobs, OmegaConf.select(probe, "trial.trials_per_gpu", default=1), device)
        except ConfigError as error:
            raise UserError(str(error)) from error
        try:
            storage = open_storage(settings.storage, base_dir)
        except STORAGE_ERRORS as error:
            raise UserError(f"hydra.sweeper.storage={settings.storage!r}: cannot open the Optuna storage "
                            f"({one_line(error)})") from error
        launch_dir = make_launch_dir(absolute_path(str(config.hydra.sweep.dir), base_dir))
        launch_number, parent = join_study(config, settings, storage, base_dir)
        if parent is not None:
            write_parent_ref(launch_dir, parent)  # every trial's Tracker files its run under it
        spec = WorkerSpec(context, config, TaskRef.of(task), settings, space, str(launch_dir), launch_number, base_dir,
                          {"instances": Singleton.get_state()["instances"]})  # resolvers: re-registered there
        return cls(spec, gpus, worker_threads(len(gpus)), parent, space.log_scale())

    # ---------------------------------------------------------------- the workers

    def run_workers(self) -> int:
        """Start the workers the study still needs, wait for them; the exit code of the sweep."""
        from rookworld.sweep.worker import PARENT_PID_ENV

        needed = min(len(self.gpus), self.trials_left())
        control = Path(self.spec.launch_dir) / ".sweep"
        spec_path = control / "worker_spec.pkl"
        with open(spec_path, "wb") as handle:
            pickle.dump(self.spec, handle)
        (control / "launch.json").write_text(json.dumps({"start": time.time(), "workers": needed, "gpus": self.gpus[:needed],
                                                         "launch": self.spec.launch, "pid": os.getpid()}))
        log.info("study %s: %d workers in %s", self.spec.settings.study_name, needed, self.spec.launch_dir)
        for index in range(needed):
            env = {**os.environ, PARENT_PID_ENV: str(os.getpid())}
            env.setdefault("OMP_NUM_THREADS", str(self.threads))
            if self.gpus[index] is not None:
                env["CUDA_VISIBLE_DEVICES"] = self.gpus[index]
            self.workers.append(subprocess.Popen([sys.executable, "-m", "rookworld.sweep.run_worker", str(spec_path),
                                                  str(index)], env=env))
        return self.wait()

    def trials_left(self) -> int:
        from optuna.trial import TrialState

        from rookworld.sweep.study import is_stale_failure

        trials = self.load_study().get_trials(deepcopy=False)
        counted = sum(t.state != TrialState.WAITING and not is_stale_failure(t) for t in trials)
        return max(0, self.spec.settings.n_trials - counted)

    def wait(self) -> int:
        try:
            codes = [worker.wait() for worker in self.workers]
        except Interrupted as stop:
            self.stop_workers(stop.signum)  # the same signal: their runs' stop reason names it
            raise
        for index, code in enumerate(codes):
            if code not in (0, 3):  # 3: too many failures, already reported by the worker
                print(f"rookworld: error: sweep worker {index} exited with code {code} (its trial is retried by the "
                      "next launch)", file=sys.stderr, flush=True)
        return 0 if all(code == 0 for code in codes) else 1

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

    def load_study(self) -> Any:
        import optuna

        from rookworld.sweep.study import open_storage

        settings = self.spec.settings
        return optuna.load_study(study_name=settings.study_name,
                                 storage=open_storage(settings.storage, self.spec.base_dir))

    def finish(self) -> None:
        """Print the study's summary; if no trial runs any more, log it on the parent run and end that."""
        from optuna.trial import TrialState

        from rookworld.sweep.lock import storage_lock
        from rookworld.sweep.mlflow_parent import finish_study_parent, study_parent_run
        from rookworld.sweep.summary import study_markdown, summarise_study

        settings = self.spec.settings
        with storage_lock(settings.storage, self.spec.base_dir, f"study:{settings.study_name}"):
            study = self.load_study()
            running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            if running or self.trials_left():
                print(study_markdown(summarise_study(study)), flush=True)
                print(f"study {study.study_name}: {len(running)} trials still running, {self.trials_left()} to start "
                      "(other workers, or run the same command again); its MLflow parent run stays open", flush=True)
                return
            if self.parent is None:
                print(study_markdown(summarise_study(study)), flush=True)
                return
            client, parent = study_parent_run(self.spec.config, study)
            top_k = int(self.spec.config.tracking.summary_top_k)
            finish_study_parent(client, parent, study, top_k, self.log_scale)
            from rookworld.sweep.summary import fetch_study_runs

            print(study_markdown(summarise_study(study, fetch_study_runs(client, parent.experiment_id,
                                                                        study.study_name))), flush=True)
            log.info("study %s finished: MLflow parent run %s ended", study.study_name, parent.run_id)


# ---------------------------------------------------------------- validation


def check_trial_configs(config: DictConfig, context: HydraContext, space: SearchSpace,
                        validate: str | None) -> DictConfig:
    """Compose the trial config for each probe of the search space; check types and `validate` it."""
    loader = context.config_loader
    probes = []
    for params in space.probes():
        overrides = [*space.overrides(params), "trial.number=0"]
        try:
            probes.append(loader.load_sweep_config(config, overrides))
        except Exception as error:  # Hydra's composition errors: a key that does not exist, a bad value
            swept = " ".join(f"{k}={v}" for k, v in params.items())
            raise ConfigError(f"{' '.join(space.fixed)} {swept}: {one_line(error)}".strip()) from error
    check_override_types(config, loader, space, probes[0])
    if validate:
        from hydra.utils import get_method

        check = get_method(validate)
        for probe in probes:
            try:
                check(probe)
            except ConfigError:
                raise
            except Exception as error:  # a check that tripped over a value it did not expect
                raise ConfigError(f"trial config: {one_line(error)} (from {validate})") from error
    return probes[0]


def check_override_types(config: DictConfig, loader: Any, space: SearchSpace, probe: DictConfig) -> None:
    """A command-line value must keep the type of the value it replaces (`steps=abc` fails here, in one line)."""
    values = {}
    for override in space.fixed:
        key, _, _ = override.partition("=")
        key = key.lstrip("+~")
        value = OmegaConf.select(probe, key, default=_ABSENT)
        if value is not _ABSENT and value is not None and not isinstance(value, (DictConfig, ListConfig)):
            values[key] = (override, value)
    if not values:
        return
    kept = [o for o in space.fixed if o.partition("=")[0].lstrip("+~") not in values]
    reference = loader.load_sweep_config(config, [*kept, "trial.number=0"])
    for key, (override, value) in values.items():
        default = OmegaConf.select(reference, key, default=None)
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ConfigError(f"{key}={value!r}: expected true or false (its default: {default})")
        if isinstance(default, (int, float)) and not isinstance(default, bool) and (
                isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(f"{key}={value!r}: expected a number (its default: {default})")


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


def join_study(config: DictConfig, settings: SweepSettings, storage: Any, base_dir: str) -> tuple[int, ParentRef | None]:
    """Under the study's lock: create or load it, number this launch, fail stale trials, get the parent run."""
    import optuna

    from rookworld.sweep.lock import storage_lock
    from rookworld.sweep.mlflow_parent import end_orphan_runs, study_parent_run, tracking_enabled
    from rookworld.sweep.study import resolve_stale_trials

    with storage_lock(settings.storage, base_dir, f"study:{settings.study_name}"):
        study = optuna.create_study(study_name=settings.study_name, storage=storage, direction=settings.direction,
                                    load_if_exists=True)
        if study.direction.name.lower() != settings.direction:
            raise UserError(f"hydra.sweeper.direction={settings.direction!r}: study {settings.study_name!r} exists "
                            f"with direction {study.direction.name.lower()} (another study_name starts a new one)")
        launch = int(study.user_attrs.get(LAUNCHES_ATTR, 0))
        study.set_user_attr(LAUNCHES_ATTR, launch + 1)
        resolve_stale_trials(study, storage, settings.grace_period_s, settings.stale_retries)
        if not tracking_enabled(config):
            return launch, None
        try:
            client, parent = study_parent_run(config, study)
            end_orphan_runs(client, parent.experiment_id, study)
        except Exception as error:  # the tracking store: unreachable, unwritable, a bad URI
            raise UserError(f"tracking.uri={config.tracking.uri!r}: cannot start the sweep's MLflow parent run "
                            f"({one_line(error)})") from error
    return launch, parent
