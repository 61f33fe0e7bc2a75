"""Experiment tracking: a `Tracker` with an MLflow backend and a no-op backend.

    tracker = make_tracker(cfg)          # reads cfg.tracking (backend: mlflow | none)
    with tracker:                        # starts the run; the outcome tag is final on exit
        tracker.log_params(cfg)
        tracker.log_metrics({"reward": 0.3}, step=3)
        tracker.set_outcome("success")

The `none` backend never imports mlflow. The MLflow backend imports it lazily, on `__enter__`.
Metrics are buffered on the calling thread (microseconds per call) and shipped every
`tracking.flush_interval_s` seconds, and at close, to a writer subprocess that logs them in
batches (`MlflowClient.log_batch`), so MLflow's per-metric CPU cost never holds the trainer's GIL;
a write error is re-raised on the calling thread at the next `log_metrics` or at close.

Run outcome (tag `rookworld.outcome`): "running" from the start, then one of OUTCOMES. On exit:
an exception in the body gives "failed" with `rookworld.stop_reason` = "ExcType: message" (the
exception propagates); a clean exit with no outcome set gives "success". MLflow run status:
success -> FINISHED; kl_failure, nan_failure, failed -> FAILED; pruned -> KILLED; an interrupt
(KeyboardInterrupt, SystemExit) -> KILLED.

In a Hydra multirun job the run is a child of the sweep's parent run, whose id the sweep callback
(`rookworld.sweep.mlflow_parent.MLflowSweepCallback`) writes to `<sweep dir>/.mlflow_parent_run`
before any job starts; the child is tagged `mlflow.parentRunId`, `rookworld.trial` and
`rookworld.study`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

if TYPE_CHECKING:
    from mlflow import MlflowClient

log = logging.getLogger(__name__)

OUTCOMES = ("running", "success", "kl_failure", "nan_failure", "pruned", "failed")
OUTCOME_TAG = "rookworld.outcome"
STOP_REASON_TAG = "rookworld.stop_reason"
TRIAL_TAG = "rookworld.trial"
STUDY_TAG = "rookworld.study"
OVERRIDES_TAG = "rookworld.overrides"
ROLE_TAG = "rookworld.role"
PARENT_TAG = "mlflow.parentRunId"
PARENT_RUN_FILE = ".mlflow_parent_run"
BACKENDS = ("mlflow", "none")

RUN_STATUS = {
    "running": "FINISHED",
    "success": "FINISHED",
    "kl_failure": "FAILED",
    "nan_failure": "FAILED",
    "pruned": "KILLED",
    "failed": "FAILED",
}
CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
TRACKING_CONFIG = CONF_DIR / "tracking" / "mlflow.yaml"  # its defaults, for the CLIs outside Hydra
MAX_PARAMS_TAGS_PER_BATCH = 100  # MLflow's limit on params, and on tags, in one log_batch
MAX_TAG_LENGTH = 8000  # MLflow's limit on a tag value
_MAX_METRICS_PER_BATCH = 1000
_MAX_KEY_LENGTH = 250
_MAX_REASON_LENGTH = 1000
_INVALID_KEY_CHARS = re.compile(r"[^/\w.\- :]")


class TrackingError(RuntimeError):
    """A tracking store that cannot be used; the message is one line."""


# ---------------------------------------------------------------- settings and run context


@dataclass(frozen=True)
class TrackingSettings:
    backend: str
    uri: str
    experiment: str
    run_name: str | None
    artifact_location: str | None
    flush_interval_s: float
    param_value_max: int
    connect_timeout_s: float

    @classmethod
    def from_config(cls, tracking: DictConfig, base_dir: str) -> TrackingSettings:
        """Settings of `tracking` (a conf/tracking node); a relative sqlite path resolves against base_dir."""
        backend = str(tracking.backend)
        if backend not in BACKENDS:
            raise ValueError(f"tracking.backend must be one of {BACKENDS}, got {backend!r}")
        if backend == "none":
            return cls(backend, "", "", None, None, 0.0, 0, 0.0)
        return cls(
            backend=backend,
            uri=resolve_uri(str(tracking.uri), base_dir),
            experiment=str(tracking.experiment),
            run_name=tracking.run_name,
            artifact_location=tracking.artifact_location,
            flush_interval_s=float(tracking.flush_interval_s),
            param_value_max=int(tracking.param_value_max),
            connect_timeout_s=float(tracking.connect_timeout_s),
        )


@dataclass(frozen=True)
class ParentRef:
    """What a sweep's parent-run file holds: enough for a child to attach to the parent."""

    run_id: str
    experiment_id: str
    tracking_uri: str


@dataclass(frozen=True)
class SweepContext:
    """Where a multirun job sits in its sweep."""

    sweep_dir: Path
    trial: int
    study: str
    overrides: tuple[str, ...]


def write_parent_ref(sweep_dir: Path, ref: ParentRef) -> Path:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    path = sweep_dir / PARENT_RUN_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(ref.__dict__))
    tmp.replace(path)  # atomic: a reader never sees half a file
    return path


def read_parent_ref(sweep_dir: Path) -> ParentRef | None:
    path = sweep_dir / PARENT_RUN_FILE
    if not path.exists():
        return None
    return ParentRef(**json.loads(path.read_text()))


def study_name(cfg: DictConfig, sweeper_study: str | None, sweep_dir: str) -> str:
    """`sweep.study_name` in the config, else the sweeper's `study_name`, else the sweep dir."""
    return str(OmegaConf.select(cfg, "sweep.study_name", default=None) or sweeper_study or sweep_dir)


def absolute_path(path: str, base: str | None) -> Path:
    p = Path(path)
    return p if p.is_absolute() else Path(base or os.getcwd()) / p


def hydra_base_dir() -> str:
    """The directory relative paths are resolved against: Hydra's launch cwd, else the cwd."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        cwd = OmegaConf.select(HydraConfig.get(), "runtime.cwd", default=None)
        if cwd:
            return str(cwd)
    return os.getcwd()


def sweep_context(cfg: DictConfig) -> SweepContext | None:
    """The sweep this process's Hydra job belongs to, or None outside a multirun."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None
    hc = HydraConfig.get()
    if hc.mode != RunMode.MULTIRUN:
        return None
    trial = OmegaConf.select(cfg, "trial.number", default=None)
    if trial is None:
        trial = hc.job.num
    sweeper_study = OmegaConf.select(hc, "sweeper.study_name", default=None)
    return SweepContext(
        sweep_dir=absolute_path(str(hc.sweep.dir), hydra_base_dir()),
        trial=int(trial),
        study=study_name(cfg, sweeper_study, str(hc.sweep.dir)),
        overrides=tuple(str(o) for o in hc.overrides.task),
    )


# ---------------------------------------------------------------- formatting helpers


def one_line(exc: BaseException) -> str:
    """"ExcType: message" on one line, capped in length."""
    message = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text[:_MAX_REASON_LENGTH]


def overrides_tag(overrides: Iterable[Any]) -> str:
    """The `rookworld.overrides` tag value: the overrides, space-separated, cut to MLflow's tag limit."""
    return " ".join(str(o) for o in overrides)[:MAX_TAG_LENGTH]


def sanitize_key(key: str) -> str:
    """A metric/param key MLflow accepts: allowed characters only, no empty or '..' segments."""
    cleaned = _INVALID_KEY_CHARS.sub("_", str(key))
    parts = [("_" if p == ".." else p) for p in cleaned.split("/") if p not in ("", ".")]
    return ("/".join(parts) or "_")[:_MAX_KEY_LENGTH]


def _format_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return str(value)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def flatten_config(cfg: DictConfig) -> dict[str, str]:
    """The resolved config as dotted keys -> strings; lists of scalars stay one JSON value."""
    container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False, enum_to_str=True)
    assert isinstance(container, dict)
    container.pop("hydra", None)
    flat: dict[str, str] = {}
    _flatten_into(flat, container, "")
    return flat


def _flatten_into(flat: dict[str, str], node: Any, prefix: str) -> None:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            _flatten_into(flat, value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, list) and node and not all(_is_scalar(v) for v in node):
        for index, value in enumerate(node):
            _flatten_into(flat, value, f"{prefix}.{index}")
    elif isinstance(node, (list, dict)):
        flat[prefix] = json.dumps(node)
    else:
        flat[prefix] = _format_value(node)


def git_state(repo_dir: Path) -> dict[str, str]:
    """`git.commit` and `git.dirty` (tracked files modified) of the repository holding the code."""
    try:
        commit = _git(repo_dir, "rev-parse", "HEAD")
        dirty = bool(_git(repo_dir, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError) as exc:  # no git, not a repository, or git hung
        log.warning("git state unknown for %s (%s)", repo_dir, one_line(exc))
        return {"git.commit": "unknown", "git.dirty": "unknown"}
    return {"git.commit": commit, "git.dirty": json.dumps(dirty)}


def _git(repo_dir: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo_dir), *args], capture_output=True, text=True, check=True, timeout=10
    )
    return result.stdout.strip()


def truncate_params(params: Mapping[str, str], limit: int) -> dict[str, str]:
    """Cap values at `limit` characters (the full config is also logged as config.yaml)."""
    long_keys = [k for k, v in params.items() if len(v) > limit]
    if long_keys:
        log.warning("params truncated to %d characters: %s", limit, ", ".join(long_keys))
    return {k: (v if len(v) <= limit else v[: limit - 3] + "...") for k, v in params.items()}


def table_columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Rows -> columns (union of keys, first-seen order); non-scalars become JSON strings."""
    columns: dict[str, list[Any]] = {}
    for row in rows:
        for key in row:
            columns.setdefault(str(key), [])
    for row in rows:
        for key, values in columns.items():
            value = row.get(key)
            values.append(value if _is_scalar(value) else json.dumps(value, default=str))
    return columns


# ---------------------------------------------------------------- the MLflow store


def resolve_uri(uri: str, base_dir: str) -> str:
    """Make a relative `sqlite:///file.db` absolute (against `base_dir`); other URIs unchanged."""
    prefix = "sqlite:///"
    if not uri.startswith(prefix) or uri == prefix + ":memory:":
        return uri
    path = uri[len(prefix) :]
    if Path(path).is_absolute():
        return uri
    return prefix + str(Path(base_dir, path).resolve())


def default_artifact_location(uri: str, experiment: str) -> str | None:
    """For a sqlite store, artifacts go next to the database: `<db dir>/mlruns/<experiment>`."""
    if not uri.startswith("sqlite:///"):
        return None
    db_dir = Path(uri[len("sqlite:///") :]).parent
    return (db_dir / "mlruns" / sanitize_key(experiment).replace("/", "_")).as_uri()


def check_reachable(uri: str, timeout_s: float) -> None:
    """Fail fast, in one line, when an http(s) tracking server does not answer."""
    if not uri.startswith(("http://", "https://")):
        return
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return  # it answered: reachable
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TrackingError(
            f"MLflow tracking server {uri} unreachable ({reason}); "
            "set tracking.uri=... or tracking=none"
        ) from exc


def open_store(settings: TrackingSettings) -> MlflowClient:
    """An MlflowClient on a store checked to be usable (a fresh sqlite DB is created here)."""
    check_reachable(settings.uri, settings.connect_timeout_s)
    from mlflow import MlflowClient

    try:
        client = MlflowClient(tracking_uri=settings.uri)
        client.search_experiments(max_results=1)
    except Exception as exc:
        log.exception("MLflow tracking store %s unusable", settings.uri)
        raise TrackingError(
            f"MLflow tracking store {settings.uri} unusable ({one_line(exc)}); "
            "set tracking.uri=... or tracking=none"
        ) from exc
    return client


def find_experiment(settings: TrackingSettings) -> tuple[MlflowClient, str] | None:
    """A client on the store and the id of `settings.experiment`, or None when the store has no such experiment."""
    client = open_store(settings)
    experiment = client.get_experiment_by_name(settings.experiment)
    return None if experiment is None else (client, experiment.experiment_id)


def get_or_create_experiment(client: MlflowClient, settings: TrackingSettings) -> str:
    """The experiment's id; it gets the UI tags (rookworld.mlflow_ui) when created or lacking them."""
    from mlflow.exceptions import MlflowException

    from rookworld.mlflow_ui import experiment_ui_tags

    ui_tags = experiment_ui_tags()
    found = client.get_experiment_by_name(settings.experiment)
    if found is None:
        location = settings.artifact_location or default_artifact_location(
            settings.uri, settings.experiment
        )
        try:
            return client.create_experiment(settings.experiment, artifact_location=location, tags=ui_tags)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            log.info("experiment %s created concurrently; using it", settings.experiment)
            found = client.get_experiment_by_name(settings.experiment)
            assert found is not None
    if found.lifecycle_stage != "active":
        raise TrackingError(
            f"MLflow experiment {settings.experiment!r} is deleted; restore it "
            "(mlflow experiments restore) or set tracking.experiment=..."
        )
    for key, value in ui_tags.items():
        if key not in found.tags:  # an experiment made before these tags, or by another tool
            client.set_experiment_tag(found.experiment_id, key, value)
    return found.experiment_id


# ---------------------------------------------------------------- metric writing


@dataclass
class FlushStats:
    """What the metric writer did: batches, metrics, its CPU and wall time."""

    batches: int = 0
    metrics: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0


class MetricWriter:
    """Buffers (key, value, timestamp_ms, step) rows; a writer subprocess logs them in batches.

    The calling thread only appends to a list. A feeder thread ships the buffer every
    `interval_s` as one JSON line to `python -m rookworld.tracking` (see `metric_writer_main`),
    which calls `MlflowClient.log_batch`. MLflow's SQL store spends ~0.1 ms of CPU per metric;
    in a subprocess that work never holds the training process's GIL. The writer ends at stdin
    EOF (close, or this process dying), so it never outlives the run. A writer error is raised
    here as TrackingError at the next `add` or at `close`.
    """

    def __init__(
        self, process: subprocess.Popen[str], uri: str, run_id: str, interval_s: float
    ) -> None:
        self._interval_s = interval_s
        self._process = process
        _send_line(process, json.dumps({"uri": uri, "run_id": run_id}))
        self._pending: list[tuple[str, float, int, int]] = []
        self._lock = threading.Lock()
        self._ship_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._error: TrackingError | None = None
        self._result: tuple[int, dict[str, Any]] | None = None
        self.stats = FlushStats()
        self._feeder = threading.Thread(target=self._feed, name="rookworld-metrics", daemon=True)
        self._feeder.start()

    def add(self, rows: list[tuple[str, float, int, int]]) -> None:
        self._raise_error()
        with self._lock:
            self._pending.extend(rows)

    def close(self) -> None:
        """Ship what is left, wait for the writer to finish, re-raise any writer error."""
        self._stopping.set()
        self._wake.set()
        self._feeder.join()
        try:
            self._raise_error()
            self._ship()
        finally:
            self._finish_process()

    def _feed(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self._interval_s)
            if self._stopping.is_set():
                return
            try:
                self._ship()
            except TrackingError as exc:
                log.error("%s; raised on the training thread at its next log_metrics", exc)
                self._error = exc
                return

    def _ship(self) -> None:
        with self._ship_lock:
            with self._lock:
                rows, self._pending = self._pending, []
            if not rows:
                return
            try:
                _send_line(self._process, json.dumps(rows))
            except OSError as exc:  # BrokenPipeError: the writer died
                raise TrackingError(f"MLflow metric writer stopped: {self._writer_failure()}") from exc

    def _writer_failure(self) -> str:
        code, report = self._writer_result()
        return str(report.get("error") or f"exit code {code}")

    def _writer_result(self) -> tuple[int, dict[str, Any]]:
        """The writer's exit code and final JSON report (waited for once, then cached)."""
        if self._result is None:
            try:
                code = self._process.wait(timeout=_WRITER_CLOSE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
                raise TrackingError(
                    f"MLflow metric writer did not finish within {_WRITER_CLOSE_TIMEOUT_S} s; killed"
                ) from None
            self._result = (code, _read_writer_report(self._process))
        return self._result

    def _finish_process(self) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        try:
            stdin.close()
        except OSError:
            log.debug("the metric writer had already stopped; its report says why")
        code, report = self._writer_result()
        self.stats = FlushStats(**{k: report[k] for k in FlushStats.__dataclass_fields__ if k in report})
        if code != 0 or not report.get("ok"):
            raise TrackingError(f"MLflow metric writer failed: {self._writer_failure()}")

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error


_WRITER_CLOSE_TIMEOUT_S = 300


def start_writer_process() -> subprocess.Popen[str]:
    """Started before this process imports mlflow, so both imports overlap; header sent later."""
    package_root = str(Path(__file__).resolve().parents[1])
    pythonpath = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    process = subprocess.Popen(
        [sys.executable, "-m", "rookworld.tracking", "--metric-writer"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": pythonpath},
        start_new_session=True,  # Ctrl-C reaches the trainer, which then closes the writer
    )
    return process


def _send_line(process: subprocess.Popen[str], line: str) -> None:
    assert process.stdin is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()


def stop_unused_writer(process: subprocess.Popen[str]) -> None:
    """End a writer that never got its header (the run did not start): it holds nothing."""
    process.kill()
    process.wait()
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            stream.close()


def _read_writer_report(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    lines = process.stdout.read().strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def metric_writer_main() -> int:
    """The writer subprocess: header line {uri, run_id}, then one JSON list of rows per line.

    Writes each line with log_batch (chunks of 1000); at EOF prints a JSON report (stats, ok,
    error) on stdout. Exits 1 on the first error, after logging it to stderr.
    """
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    first = sys.stdin.readline()
    if not first:
        return 0  # the run never started
    header = json.loads(first)
    client, run_id = MlflowClient(tracking_uri=header["uri"]), header["run_id"]
    stats = FlushStats()
    try:
        for line in sys.stdin:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            rows = json.loads(line)
            for start in range(0, len(rows), _MAX_METRICS_PER_BATCH):
                chunk = rows[start : start + _MAX_METRICS_PER_BATCH]
                client.log_batch(run_id, metrics=[Metric(k, v, ts, st) for k, v, ts, st in chunk])
                stats.batches += 1
            stats.metrics += len(rows)
            stats.cpu_s += time.process_time() - cpu0
            stats.wall_s += time.perf_counter() - wall0
    except Exception as exc:
        log.exception("MLflow metric writer failed")
        print(json.dumps({"ok": False, "error": one_line(exc), **stats.__dict__}), flush=True)
        return 1
    print(json.dumps({"ok": True, **stats.__dict__}), flush=True)
    return 0


# ---------------------------------------------------------------- trackers


class Tracker:
    """Common run-outcome logic; backends implement `_start`, `_write_outcome` and `_finish`."""

    def __init__(self) -> None:
        self.outcome = "running"
        self.stop_reason = ""

    @property
    def run_id(self) -> str | None:
        return None

    def __enter__(self) -> Tracker:
        self._start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.outcome, self.stop_reason = "failed", one_line(exc)
        elif self.outcome == "running":
            self.outcome = "success"
        interrupted = isinstance(exc, (KeyboardInterrupt, SystemExit))
        status = "KILLED" if interrupted else RUN_STATUS[self.outcome]
        try:
            self._finish(status)
        except Exception as finish_error:
            if exc is None:
                raise
            log.exception("closing the tracking run failed after the run raised")
            exc.add_note(f"closing the tracking run also failed: {one_line(finish_error)}")

    def set_outcome(self, outcome: str, reason: str = "") -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {outcome!r}")
        self.outcome, self.stop_reason = outcome, " ".join(str(reason).split())
        self._write_outcome()

    def _start(self) -> None:
        raise NotImplementedError

    def _write_outcome(self) -> None:
        raise NotImplementedError

    def _finish(self, status: str) -> None:
        raise NotImplementedError

    def log_params(self, cfg: DictConfig) -> None:
        raise NotImplementedError

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        raise NotImplementedError

    def log_samples(self, rows: Sequence[Mapping[str, Any]], step: int) -> None:
        raise NotImplementedError

    def log_dict(self, obj: Mapping[str, Any], artifact_file: str) -> None:
        raise NotImplementedError

    def log_config_yaml(self, cfg: DictConfig) -> None:
        raise NotImplementedError

    def log_artifacts(self, local_dir: str | Path, artifact_path: str | None = None) -> None:
        raise NotImplementedError


class NullTracker(Tracker):
    """tracking=none: logs nothing, imports nothing; outcomes are still validated."""

    def _start(self) -> None:
        log.debug("tracking disabled (tracking.backend=none)")

    def _write_outcome(self) -> None:
        pass

    def _finish(self, status: str) -> None:
        pass

    def log_params(self, cfg: DictConfig) -> None:
        pass

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        pass

    def log_samples(self, rows: Sequence[Mapping[str, Any]], step: int) -> None:
        pass

    def log_dict(self, obj: Mapping[str, Any], artifact_file: str) -> None:
        pass

    def log_config_yaml(self, cfg: DictConfig) -> None:
        pass

    def log_artifacts(self, local_dir: str | Path, artifact_path: str | None = None) -> None:
        pass


class MlflowTracker(Tracker):
    """One MLflow run; a child of the sweep's parent run inside a Hydra multirun."""

    def __init__(self, settings: TrackingSettings, sweep: SweepContext | None) -> None:
        super().__init__()
        self.settings = settings
        self.sweep = sweep
        self._client: MlflowClient | None = None
        self._run_id: str | None = None
        self._writer: MetricWriter | None = None
        self._keys: dict[str, str] = {}

    @property
    def run_id(self) -> str | None:
        return self._run_id

    @property
    def flush_stats(self) -> FlushStats:
        """The metric writer's work (complete once the run has ended)."""
        assert self._writer is not None, "flush_stats is available once the run started"
        return self._writer.stats

    def _start(self) -> None:
        process = start_writer_process()
        try:
            client, run_id, experiment_id = self._create_run()
        except BaseException:
            stop_unused_writer(process)
            raise
        self._client, self._run_id = client, run_id
        self._writer = MetricWriter(process, self.settings.uri, run_id, self.settings.flush_interval_s)
        log.info("MLflow run %s (experiment %s) at %s", run_id, experiment_id, self.settings.uri)

    def _create_run(self) -> tuple[MlflowClient, str, str]:
        client = open_store(self.settings)
        parent = self._parent_ref()
        if parent is not None:
            experiment_id = parent.experiment_id
        else:
            experiment_id = get_or_create_experiment(client, self.settings)
        run = client.create_run(experiment_id, run_name=self._run_name(), tags=self._start_tags(parent))
        return client, run.info.run_id, experiment_id

    def _parent_ref(self) -> ParentRef | None:
        if self.sweep is None:
            return None
        parent = read_parent_ref(self.sweep.sweep_dir)
        if parent is None:
            log.warning(
                "no %s in %s (sweep callback not enabled?): logging a run without parent",
                PARENT_RUN_FILE,
                self.sweep.sweep_dir,
            )
        elif parent.tracking_uri != self.settings.uri:
            log.warning(
                "sweep parent run is in %s but this job logs to %s: no parent link",
                parent.tracking_uri,
                self.settings.uri,
            )
            return None
        return parent

    def _run_name(self) -> str | None:
        if self.settings.run_name:
            return self.settings.run_name
        return f"trial_{self.sweep.trial:03d}" if self.sweep is not None else None

    def _start_tags(self, parent: ParentRef | None) -> dict[str, str]:
        tags = {OUTCOME_TAG: "running", ROLE_TAG: "trial" if self.sweep else "run"}
        if parent is not None:
            tags[PARENT_TAG] = parent.run_id
        if self.sweep is not None:
            tags[TRIAL_TAG] = str(self.sweep.trial)
            tags[STUDY_TAG] = self.sweep.study
            tags[OVERRIDES_TAG] = overrides_tag(self.sweep.overrides)
        return tags

    def _active(self) -> tuple[MlflowClient, str]:
        if self._client is None or self._run_id is None:
            raise RuntimeError("the tracker is not started: use it as `with tracker:`")
        return self._client, self._run_id

    def _write_outcome(self) -> None:
        client, run_id = self._active()
        client.set_tag(run_id, OUTCOME_TAG, self.outcome)
        if self.stop_reason:
            client.set_tag(run_id, STOP_REASON_TAG, self.stop_reason)

    def _finish(self, status: str) -> None:
        client, run_id = self._active()
        try:
            if self._writer is not None:
                self._writer.close()
        finally:
            self._write_outcome()
            client.set_terminated(run_id, status=status)
            log.info("MLflow run %s ended: %s (%s)", run_id, self.outcome, status)

    def log_params(self, cfg: DictConfig) -> None:
        from mlflow.entities import Param

        client, run_id = self._active()
        params = flatten_config(cfg)
        params.update(git_state(Path(__file__).resolve().parents[1]))
        if "seed" not in params:
            log.warning("the config has no top-level `seed`: no seed param logged")
        params = truncate_params({sanitize_key(k): v for k, v in params.items()},
                                 self.settings.param_value_max)
        items = [Param(k, v) for k, v in params.items()]
        for start in range(0, len(items), MAX_PARAMS_TAGS_PER_BATCH):
            client.log_batch(run_id, params=items[start : start + MAX_PARAMS_TAGS_PER_BATCH])
        client.set_tag(run_id, "mlflow.source.git.commit", params["git.commit"])

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        if self._writer is None:
            raise RuntimeError("the tracker is not started: use it as `with tracker:`")
        timestamp = time.time_ns() // 1_000_000
        step = int(step)
        keys = self._keys
        rows = []
        for key, value in metrics.items():
            clean = keys.get(key)
            if clean is None:
                clean = keys[key] = sanitize_key(key)
            rows.append((clean, float(value), timestamp, step))
        self._writer.add(rows)

    def log_samples(self, rows: Sequence[Mapping[str, Any]], step: int) -> None:
        client, run_id = self._active()
        if not rows:
            log.info("no samples to log at step %d", step)
            return
        client.log_table(run_id, data=table_columns(rows), artifact_file=f"samples/step_{step:06d}.json")

    def log_dict(self, obj: Mapping[str, Any], artifact_file: str) -> None:
        client, run_id = self._active()
        client.log_dict(run_id, dict(obj), artifact_file)

    def log_config_yaml(self, cfg: DictConfig) -> None:
        client, run_id = self._active()
        client.log_text(run_id, OmegaConf.to_yaml(cfg, resolve=True), "config.yaml")

    def log_artifacts(self, local_dir: str | Path, artifact_path: str | None = None) -> None:
        client, run_id = self._active()
        client.log_artifacts(run_id, str(local_dir), artifact_path)


def make_tracker(cfg: DictConfig) -> Tracker:
    """The tracker `cfg.tracking` asks for; relative sqlite paths resolve against Hydra's cwd."""
    settings = TrackingSettings.from_config(cfg.tracking, hydra_base_dir())
    if settings.backend == "none":
        return NullTracker()
    return MlflowTracker(settings, sweep_context(cfg))


if __name__ == "__main__":
    if sys.argv[1:] != ["--metric-writer"]:
        sys.exit("usage: python -m rookworld.tracking --metric-writer (started by MetricWriter)")
    logging.basicConfig(level=logging.WARNING)
    exit_code = metric_writer_main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)  # everything is committed: skip interpreter teardown (~0.5 s with mlflow)
