"""`python -m rookworld.bench.tracking_overhead`: what MLflow tracking costs a training step.

Logs a realistic metric dict (30 TRL-style metrics) per step through the Tracker into a sqlite
store (a temporary one unless --uri) and prints:
- the cost of `tracker.log_metrics` on the calling thread (mean, p50, p99, max);
- the writer subprocess's work (batches, wall and CPU time, CPU per step);
- the time to close the run (final flush);
- for comparison, a synchronous `MlflowClient.log_batch` per step.
With --step-ms T, each step first busy-waits T ms on the CPU (holding the GIL, the worst case for
the tracker's feeder thread) and the wall-clock overhead against T is printed as a percentage too.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from rookworld.tracking import TRACKING_CONFIG, FlushStats, MlflowTracker, make_tracker

METRIC_NAMES = (
    "reward", "reward_std", "reward/P", "reward/A", "reward/P/format", "reward/P/best_move",
    "reward/P/candidates", "reward/P/evaluations", "reward/A/format", "reward/A/next_state",
    "reward/A/reward", "reward/A/terminated", "frac_reward_zero_std", "kl", "kl_coef", "entropy",
    "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean",
    "completions/mean_length", "completions/min_length", "completions/max_length",
    "completions/clipped_ratio", "loss", "grad_norm", "learning_rate", "step_time",
    "tokens_per_s", "num_tokens", "advantage_std",
)
TARGET_PERCENT = 5.0
EXPERIMENT = "tracking_bench"


@dataclass(frozen=True)
class BenchResult:
    call_ms: list[float]
    close_ms: float
    wall_s: float
    flush: FlushStats


def realistic_metrics(step: int) -> dict[str, float]:
    return {name: (step * 0.001 + i) % 7 / 7 for i, name in enumerate(METRIC_NAMES)}


def busy_wait(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def bench_tracker(uri: str, steps: int, step_ms: float, flush_interval_s: float | None) -> BenchResult:
    """Log `steps` steps through a Tracker; flush_interval_s None: conf/tracking/mlflow.yaml's."""
    settings = {"uri": uri, "experiment": EXPERIMENT}
    if flush_interval_s is not None:
        settings["flush_interval_s"] = flush_interval_s
    cfg = OmegaConf.create({"seed": 0, "tracking": OmegaConf.merge(OmegaConf.load(TRACKING_CONFIG).tracking, settings)})
    tracker = make_tracker(cfg)
    assert isinstance(tracker, MlflowTracker)
    call_ms: list[float] = []
    with tracker:
        start = time.perf_counter()
        for step in range(steps):
            busy_wait(step_ms)
            metrics = realistic_metrics(step)
            t0 = time.perf_counter()
            tracker.log_metrics(metrics, step=step)
            call_ms.append((time.perf_counter() - t0) * 1000)
        wall_s = time.perf_counter() - start
        close_start = time.perf_counter()
    close_ms = (time.perf_counter() - close_start) * 1000
    return BenchResult(call_ms, close_ms, wall_s, tracker.flush_stats)


def bench_synchronous(uri: str, steps: int) -> list[float]:
    """Milliseconds per step of a direct, synchronous log_batch (what the buffer avoids)."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    assert experiment is not None
    run_id = client.create_run(experiment.experiment_id, run_name="synchronous").info.run_id
    times = []
    for step in range(steps):
        t0 = time.perf_counter()
        stamp = time.time_ns() // 1_000_000
        metrics = [Metric(k, v, stamp, step) for k, v in realistic_metrics(step).items()]
        client.log_batch(run_id, metrics=metrics)
        times.append((time.perf_counter() - t0) * 1000)
    client.set_terminated(run_id)
    return times


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(result: BenchResult, sync_ms: list[float], steps: int, step_ms: float) -> str:
    calls = result.call_ms
    per_step_cpu_ms = result.flush.cpu_s * 1000 / steps
    lines = [
        f"log_metrics on the calling thread: mean {statistics.fmean(calls):.3f} ms, "
        f"p50 {percentile(calls, 0.5):.3f} ms, p99 {percentile(calls, 0.99):.3f} ms, "
        f"max {max(calls):.3f} ms",
        f"writer subprocess: {result.flush.batches} batches, {result.flush.metrics} metrics, "
        f"{result.flush.wall_s * 1000:.0f} ms wall, {result.flush.cpu_s * 1000:.0f} ms CPU "
        f"({per_step_cpu_ms:.3f} ms CPU per step)",
        f"close (final flush, outcome tags, run end): {result.close_ms:.0f} ms",
        f"for comparison, synchronous log_batch per step: mean {statistics.fmean(sync_ms):.2f} ms, "
        f"p99 {percentile(sync_ms, 0.99):.2f} ms",
    ]
    if step_ms > 0:
        hot = statistics.fmean(calls) / step_ms * 100
        wall = (result.wall_s * 1000 / steps - step_ms) / step_ms * 100
        verdict = "OK" if max(hot, wall) <= TARGET_PERCENT else "OVER TARGET"
        lines.append(
            f"against a {step_ms:g} ms step: calling thread {hot:.3f} %, wall-clock overhead "
            f"(incl. contention with the writer) {wall:.2f} % (target <= {TARGET_PERCENT:g} %: {verdict})"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m rookworld.bench.tracking_overhead", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=None,
                        help="steps to log (default 1000, or 50 with --step-ms)")
    parser.add_argument("--step-ms", type=float, default=0.0,
                        help="simulated step time in ms (busy CPU); prints overhead in %%")
    parser.add_argument("--uri", default=None, help="tracking URI (default: a temporary sqlite store)")
    parser.add_argument("--flush-interval-s", type=float, default=None,
                        help="seconds between metric flushes (default tracking.flush_interval_s of "
                             "conf/tracking/mlflow.yaml)")
    parser.add_argument("--sync-steps", type=int, default=50,
                        help="steps for the synchronous comparison")
    args = parser.parse_args(argv)
    for option, value in (("--steps", args.steps), ("--sync-steps", args.sync_steps)):
        if value is not None and value < 1:
            parser.error(f"{option} {value}: must be >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    steps = args.steps if args.steps is not None else (50 if args.step_ms > 0 else 1000)
    with tempfile.TemporaryDirectory(prefix="rookworld-bench-") as tmp:
        uri = args.uri or f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        print(f"rookworld tracking benchmark: {len(METRIC_NAMES)} metrics per step, {steps} steps, {uri}",
              flush=True)
        result = bench_tracker(uri, steps, args.step_ms, args.flush_interval_s)
        sync_ms = bench_synchronous(uri, args.sync_steps)
        print(report(result, sync_ms, steps, args.step_ms), flush=True)


if __name__ == "__main__":
    main()
