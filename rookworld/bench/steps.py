"""Timing of real GRPO steps on the current device (the library of `python -m rookworld.bench`).

Composes conf/bench.yaml (the training config at the benchmark's shapes plus `bench.*` knobs),
builds a Trainer like `rookworld.train` does, runs `bench.warmup` untimed steps, then times
`bench.steps` calls of the real `Trainer.train_step` with exact per-phase times (generation with
the completion texts; logprobs = queueing the reference/old log-prob passes; scoring = the rewards,
computed on the host while those passes run, until both are done; update = forward/backward/
optimizer, during which the host samples the next step's problems). Prints a table and writes
`bench.json` (to the Hydra run dir and to `bench.output` if set).

Model: `model` as configured (RookWorld-LM-124M from the hub by default). When it cannot be loaded
(offline) and `bench.random_weights=auto`, a random-init model of `bench.random_model`'s shape
(GPT-2 small: 12 layers, 12 heads, 768 wide, vocab 50257, 1024 positions) is used with the
project's tiny chess tokenizer for the text: prompts are tiny-tokenizer ids (a subset of the
50257-token vocabulary) and sampled ids the tiny tokenizer does not know decode to nothing, so
rewards are those of garbage completions. Timing depends on the shapes, not on the text.

Modes (combine freely):
  bench.self_check=true       fast path vs plain path before timing (tokens, log-probs, loss)
  bench.steps=500             memory soak: allocated memory at the start and end of the timed run
  bench.trials=20             build 20 trainers (each with its own decoder) in sequence, a few
                              steps each, batch shape changing within each trial
  bench.compare_plain_steps=N also time N steps of the plain sampler
  bench.trl=auto              TRL's GRPOTrainer on the same shapes when `trl` is installed
"""
from __future__ import annotations

import gc
import json
import statistics
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from rookworld.bench.checks import self_check
from rookworld.bench.models import fresh_policy, load_bench_model
from rookworld.run.build import assemble, make_sampler
from rookworld.model.fast_sampling import make_decoder
from rookworld.model.gpt2 import GPT, GPTConfig
from rookworld.model.sampling import PlainDecoder
from rookworld.model.tokenizer import ChessTokenizer
from rookworld.specs.bench import BenchSpec
from rookworld.specs.rules import resolve_device
from rookworld.tracking import NullTracker
from rookworld.run.trainer import Trainer

PHASES = ("generation", "scoring", "logprobs", "update")
GIB = 2 ** 30


# ---------------------------------------------------------------- building
def build_trainer(spec: BenchSpec, policy: GPT, tokenizer: ChessTokenizer, decoder: str) -> Trainer:
    """A Trainer as `rookworld.train` builds it (no held-out set, no tracking) around `policy`, with the
    chosen decoder (bench.full_length: stops ignored) and a device sync per phase (exact phase times)."""
    full = bool(spec.bench.full_length)
    chosen = make_decoder(policy, ignore_stops=full, check_every=spec.run.sampling.finish_check_every) \
        if decoder == "fast" else PlainDecoder(policy, ignore_stops=full)
    return assemble(spec.run, policy, tokenizer, sampler=make_sampler(spec.run), heldout=[], tracker=NullTracker(),
                    decoder=chosen, sync_phases=True)


def release(trainer: Trainer) -> None:
    """Free the trainer's GPU memory now (the next trainer's numbers start clean)."""
    trainer.close()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()


# ---------------------------------------------------------------- timing
def time_steps(trainer: Trainer, warmup: int, steps: int) -> dict:
    """Per-step phase times and memory of `steps` train_steps after `warmup` untimed ones."""
    for step in range(warmup):
        trainer.train_step(step)
    cuda = trainer.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    memory_start = torch.cuda.memory_allocated() if cuda else 0
    records = []
    peak, captures = 0, pass_graph_captures(trainer)
    for step in range(warmup, warmup + steps):
        start = time.perf_counter()
        metrics, _ = trainer.train_step(step)
        if cuda:
            torch.cuda.synchronize()
        records.append({"wall": time.perf_counter() - start,
                        **{p: metrics[f"time/{p}"] for p in PHASES},
                        "tokens": metrics["completions/num_tokens"], "loss": metrics["loss"],
                        "kl": metrics.get("kl", 0.0), "captured": pass_graph_captures(trainer) - captures,
                        "sampler_gap_mean": metrics["sampler/logp_gap_mean"],
                        "sampler_gap_max": metrics["sampler/logp_gap_max"]})
        captures += records[-1]["captured"]
        if cuda:  # each step's own peak, so steps that capture new graphs can be told apart
            records[-1]["peak_gib"] = torch.cuda.max_memory_allocated() / GIB
            peak = max(peak, torch.cuda.max_memory_allocated())
            torch.cuda.reset_peak_memory_stats()
    result = {"steps": steps, "warmup": warmup, "records": records, "summary": summarize(records)}
    if cuda:
        result["memory"] = {"start_gib": memory_start / GIB, "end_gib": torch.cuda.memory_allocated() / GIB,
                            "peak_gib": peak / GIB,
                            "peak_without_capture_gib": max((r["peak_gib"] for r in records if not r["captured"]),
                                                            default=0.0),
                            "peak_reserved_gib": torch.cuda.max_memory_reserved() / GIB,
                            "reserved_end_gib": torch.cuda.memory_reserved() / GIB}
    return result


def pass_graph_captures(trainer: Trainer) -> int:
    """CUDA graphs of the training passes captured so far (0 when they are off)."""
    graphs = (trainer.learner.policy_graphs, trainer.learner.logprob_graphs)
    return sum(g.captures for g in graphs if g is not None)


def summarize(records: list[dict]) -> dict:
    summary = {}
    for key in ("wall", *PHASES):
        values = [r[key] for r in records]
        summary[key] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
    generation = sum(r["generation"] for r in records)
    summary["tokens_per_step"] = statistics.median(r["tokens"] for r in records)
    summary["generated_tokens_per_s"] = sum(r["tokens"] for r in records) / max(generation, 1e-9)
    summary["finite_losses"] = all(r["loss"] == r["loss"] for r in records)
    summary["sampler_gap_mean"] = statistics.mean(r["sampler_gap_mean"] for r in records)
    summary["sampler_gap_max"] = max(r["sampler_gap_max"] for r in records)
    return summary


def run_trials(spec: BenchSpec, config: GPTConfig, state: dict, tokenizer: ChessTokenizer,
               device: torch.device) -> dict:
    """Many trainers in one process, each with its own decoder whose batch shape changes mid-trial."""
    b = spec.bench
    memory, errors = [], []
    sizes = [spec.run.prompts_per_step, max(1, spec.run.prompts_per_step - 1)]
    for trial in range(b.trials):
        trial_spec = replace(spec, run=replace(spec.run, seed=spec.run.seed + trial))
        trainer = build_trainer(trial_spec, fresh_policy(config, state, device), tokenizer, str(b.decoder))
        try:
            for step in range(b.trial_steps):
                trainer.settings = replace(trainer.settings, prompts_per_step=sizes[(trial + step) % 2])
                trainer.train_step(step)
        except Exception as error:  # recorded and reported: the point of this mode
            errors.append(f"trial {trial}: {type(error).__name__}: {error}")
        captures = getattr(trainer.decoder, "captures", 0)
        release(trainer)
        memory.append(torch.cuda.memory_allocated() / GIB if torch.cuda.is_available() else 0.0)
        print(f"trial {trial + 1}/{b.trials}: {'error' if errors and errors[-1].startswith(f'trial {trial}:') else 'ok'}"
              f", graphs captured {captures}, memory after {memory[-1]:.3f} GiB", flush=True)
    return {"trials": int(b.trials), "steps_each": int(b.trial_steps), "errors": errors,
            "memory_after_each_gib": memory}


def profile_step(trainer: Trainer, step: int) -> dict:
    """Kernel tables (torch.profiler) of one whole train_step and of one generation call."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if trainer.device.type == "cuda" else [])
    with profile(activities=activities) as step_profile:
        trainer.train_step(step)
    rows = trainer.sample_rows()
    with profile(activities=activities) as generation_profile:
        trainer.generate(rows)
    return {"train_step": kernel_table(step_profile), "generation": kernel_table(generation_profile)}


def kernel_table(prof, rows: int = 50) -> str:
    sort = "self_device_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=sort, row_limit=rows, max_name_column_width=70)


# ---------------------------------------------------------------- report
def environment(device: torch.device) -> dict:
    env = {"device": str(device), "torch": torch.__version__}
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
    return env


def format_report(results: dict) -> str:
    lines = [f"device: {results['environment'].get('gpu', results['environment']['device'])} | "
             f"torch {results['environment']['torch']}",
             f"model: {results['model']}", f"shapes: {results['shapes']}", f"decoder: {results['decoder']}"]
    if "self_check" in results:
        lines.append(self_check_line(results["self_check"]))
    for name in ("fast", "plain"):
        if name in results:
            lines += format_timing(name, results[name])
    if "pass_graph_captures" in results:
        c = results["pass_graph_captures"]
        lines.append(f"CUDA graphs of the training passes captured: update {c['update']}, log-probs {c['logprobs']}")
    if "trials" in results:
        t = results["trials"]
        lines.append(f"trials: {t['trials']} x {t['steps_each']} steps, errors: {len(t['errors'])}, "
                     f"memory after each: {min(t['memory_after_each_gib']):.3f}..{max(t['memory_after_each_gib']):.3f} GiB")
    if "trl" in results:
        lines.append(f"TRL: {results['trl']}")
    return "\n".join(lines)


def self_check_line(check: dict) -> str:
    names = [name for name, result in check.items() if isinstance(result, dict)]
    if check["ok"]:
        return f"self-check: passed ({', '.join(names)})"
    return "self-check failed: " + "; ".join(check["failed"])


def format_timing(name: str, timing: dict) -> list[str]:
    s = timing["summary"]
    lines = [f"[{name} path] {timing['steps']} timed steps after {timing['warmup']} warm-up",
             f"  {'phase':<12}{'median':>9}{'min':>9}{'max':>9}  (seconds)"]
    for key in ("wall", *PHASES):
        label = "step (wall)" if key == "wall" else key
        lines.append(f"  {label:<12}{s[key]['median']:>9.4f}{s[key]['min']:>9.4f}{s[key]['max']:>9.4f}")
    lines.append(f"  generated tokens/step {s['tokens_per_step']:.0f}, {s['generated_tokens_per_s']:,.0f} tokens/s, "
                 f"finite losses: {s['finite_losses']}")
    lines.append(f"  sampler/trainer log-prob gap per token: mean {s['sampler_gap_mean']:.2e}, "
                 f"max {s['sampler_gap_max']:.2e} (nats)")
    if "memory" in timing:
        m = timing["memory"]
        lines.append(f"  GPU memory: peak {m['peak_gib']:.3f} GiB allocated ({m['peak_reserved_gib']:.3f} reserved; "
                     f"{m['peak_without_capture_gib']:.3f} in steps that captured no graph), "
                     f"allocated at start {m['start_gib']:.3f} / end {m['end_gib']:.3f} GiB, "
                     f"reserved at end {m['reserved_end_gib']:.3f} GiB")
    return lines


def write_results(results: dict, output: str | None, run_dir: Path | None = None) -> list[Path]:
    """bench.json in `run_dir` (the Hydra run dir of `python -m rookworld.bench`) and at `output` (when set)."""
    paths = ([run_dir / "bench.json"] if run_dir else []) + ([Path(output)] if output else [])
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2) + "\n")
    return paths


# ---------------------------------------------------------------- main
def run(spec: BenchSpec) -> dict:
    b = spec.bench
    device = resolve_device(spec.run.device)
    policy, tokenizer, description = load_bench_model(spec, device)
    initial = {k: v.detach().to("cpu", copy=True) for k, v in policy.state_dict().items()}
    config = policy.config
    results = {"environment": environment(device), "model": description,
               "shapes": shapes(spec), "config": asdict(b)}
    trainer = build_trainer(spec, policy, tokenizer, str(b.decoder))
    del policy  # the trainer holds it; released with it
    results["decoder"] = type(trainer.decoder).__name__
    if b.self_check:
        results["self_check"] = self_check(trainer)
        print("self-check: " + json.dumps(results["self_check"]), flush=True)
        if not results["self_check"]["ok"]:  # nothing to time: the fast path is not the plain one
            release(trainer)
            return results
    results["fast" if b.decoder == "fast" else "plain"] = time_steps(trainer, b.warmup, b.steps)
    if trainer.learner.policy_graphs is not None:
        results["pass_graph_captures"] = {"update": trainer.learner.policy_graphs.captures,
                                          "logprobs": trainer.learner.logprob_graphs.captures}
    if b.profile:
        results["profile"] = profile_step(trainer, b.warmup + b.steps)
        print(results["profile"]["train_step"] + "\n" + results["profile"]["generation"])
    release(trainer)
    if b.compare_plain_steps:
        plain = build_trainer(spec, fresh_policy(config, initial, device), tokenizer, "plain")
        results["plain"] = time_steps(plain, 1, b.compare_plain_steps)
        release(plain)
    if b.trials:
        results["trials"] = run_trials(spec, config, initial, tokenizer, device)
    if str(b.trl).lower() != "false":
        from rookworld.bench.trl_compare import run_trl  # imports trl when installed
        results["trl"] = run_trl(spec, results)
    return results


def shapes(spec: BenchSpec) -> str:
    run = spec.run
    caps = dict(run.sampling.max_new_tokens)
    return (f"{run.prompts_per_step} prompts x {run.grpo.group_size} completions, max_new_tokens {caps}, "
            f"{'full length (stops ignored)' if spec.bench.full_length else 'stops on'}, "
            f"micro_batch_size {run.grpo.micro_batch_size or 'all'}"
            f"{' + activation checkpointing' if run.grpo.activation_checkpointing else ''}, kl {run.kl.kind}")
