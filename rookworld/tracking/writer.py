"""The metric-writer subprocess: metrics buffered on the trainer's thread are shipped every
flush_interval_s to `python -m rookworld.tracking --metric-writer`, which logs them in batches,
so MLflow's per-metric CPU cost never holds the trainer's GIL (docs/tracking.md)."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rookworld.tracking.params import one_line
from rookworld.tracking.settings import TrackingError

log = logging.getLogger(__name__)
_MAX_METRICS_PER_BATCH = 1000


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
    package_root = str(Path(__file__).resolve().parents[2])
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
        _report({"ok": False, "error": one_line(exc), **stats.__dict__})
        return 1
    _report({"ok": True, **stats.__dict__})
    return 0


def _report(report: dict[str, Any]) -> None:
    """The final report on stdout; nobody reads it when the training process was killed (SIGKILL):
    then it goes nowhere, without a BrokenPipeError traceback."""
    try:
        print(json.dumps(report), flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the flush at exit must not fail again
