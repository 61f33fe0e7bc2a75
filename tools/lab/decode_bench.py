"""Generation-only benchmark of the decode fast path over kernel layouts (on a GPU machine; docs/lab/performance-versions.md).

    python3 tools/lab/decode_bench.py [--profile] [--phases] [--trainer-steps N] [--baseline DIR] layout ...

A layout is NAME=VALUE[,NAME=VALUE] over rookworld.model.decode_kernels constants, e.g.
`ATTENTION_WARPS=4,LINEAR_BLOCK_N=64`; `default` is the module as it is. Each layout gets a fresh
StaticDecoder on the benchmark's shapes (conf/bench.yaml: random GPT-2 124M, 8 prompts x 8
completions of mixed P:/A: prompts, 144 tokens, stops ignored) and is timed over repeated
generations (wall clock around a synchronised call, median of --repeats after --warmup).
`--override model=rookworld_tiny` (repeatable) changes the bench config. `--baseline DIR` also
times the decoder modules found in DIR (a copy of an earlier
fast_sampling.py + decode_kernels.py) the same way, in the same process. `--phases` splits one
call into prefill / decode loop / collect; `--trainer-steps N` times the generation phase of real
GRPO steps next to direct calls of the same decoder (what the trainer adds around generation).
Needs CUDA (and Triton); docs/lab/performance-versions.md has what each sweep found.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rookworld.bench.models import load_bench_model  # noqa: E402
from rookworld.model import decode_kernels  # noqa: E402
from rookworld.model.fast_sampling import StaticDecoder  # noqa: E402
from rookworld.judge.rollout import prompt_ids  # noqa: E402
from rookworld.run.build import make_sampler  # noqa: E402
from rookworld.app.config import load_bench  # noqa: E402


def parse_layout(text: str) -> dict:
    if text == "default":
        return {}
    return {name: int(value) for name, value in (item.split("=") for item in text.split(","))}


def time_decoder(decoder, request: dict, warmup: int, repeats: int, generator=None) -> list[float]:
    generator = generator or torch.Generator(device="cuda").manual_seed(0)  # a new generator: a new capture
    times = []
    for i in range(warmup + repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        decoder.generate(generator=generator, **request)
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return times


def generation_phases(policy, request: dict, repeats: int) -> list[tuple[str, list[float]]]:
    """Wall time of each part of StaticDecoder.generate, with a device sync around each part."""
    decoder = StaticDecoder(policy, ignore_stops=True)
    seconds: dict[str, list[float]] = {}

    def timed(name, method):
        def wrapper(*args, **kwargs):
            torch.cuda.synchronize()
            start = time.perf_counter()
            result = method(*args, **kwargs)
            torch.cuda.synchronize()
            seconds.setdefault(name, []).append(time.perf_counter() - start)
            return result
        return wrapper

    for name in ("_prefill", "_decode", "_collect"):
        setattr(decoder, name, timed(name, getattr(decoder, name)))
    time_decoder(decoder, request, 2, repeats)
    decoder.close()
    return [(f"phase {name}", values[2:]) for name, values in seconds.items()]


def trainer_generation(cfg, policy, tokenizer, request: dict, steps: int) -> list[tuple[str, list[float]]]:
    """The generation phase of real train_steps, and right after each step the same decoder timed on
    the fixed request: separates the trainer's own overhead from the decoder's."""
    from rookworld.bench.steps import build_trainer

    trainer = build_trainer(cfg, policy, tokenizer, "fast")
    phase, direct, fresh, again, host = [], [], [], [], []
    for step in range(steps + 3):
        metrics, _ = trainer.train_step(step)
        times = time_decoder(trainer.decoder, request, 0, 2, trainer.generator)
        start = time.perf_counter()
        rows = trainer.sample_rows()
        fresh_request = {**request, "prompts": [prompt_ids(tokenizer, p) for p in rows]}
        host_time = time.perf_counter() - start
        fresh_times = time_decoder(trainer.decoder, fresh_request, 0, 1, trainer.generator)
        if step >= 3:
            phase.append(metrics["time/generation"])
            direct.append(times[0])
            again.append(times[1])
            fresh.append(fresh_times[0])
            host.append(host_time)
    return [("trainer: generation phase", phase),
            ("trainer: generate(fixed request) right after a step", direct),
            ("trainer: generate(fixed request) again", again),
            ("trainer: generate(fresh step-like request)", fresh),
            ("trainer: sample + encode 64 prompts (host)", host)]


def load_baseline(directory: str):
    """An earlier StaticDecoder, its kernels module bound in place of the current one."""
    kernels_spec = importlib.util.spec_from_file_location("baseline_kernels", f"{directory}/decode_kernels.py")
    old_kernels = importlib.util.module_from_spec(kernels_spec)
    kernels_spec.loader.exec_module(old_kernels)
    source = Path(directory, "fast_sampling.py").read_text().replace(
        "from rookworld.model import decode_kernels as kernels", "import baseline_kernels as kernels")
    sys.modules["baseline_kernels"] = old_kernels
    module = type(sys)("baseline_fast_sampling")
    sys.modules[module.__name__] = module
    exec(compile(source, f"{directory}/fast_sampling.py", "exec"), module.__dict__)
    return module.StaticDecoder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("layouts", nargs="*", default=["default"])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--profile", action="store_true", help="kernel table of one generation (first layout)")
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--phases", action="store_true",
                        help="also: prefill / decode loop / collect of the default layout, synchronised apart")
    parser.add_argument("--override", action="append", default=[],
                        help="a Hydra override of the bench config, e.g. model=rookworld_tiny (repeatable)")
    parser.add_argument("--trainer-steps", type=int, default=0,
                        help="also: GRPO steps of a bench trainer, each followed by a direct generate() call")
    args = parser.parse_args()
    with initialize_config_dir(config_dir=str(ROOT / "conf")):
        cfg = load_bench(compose("bench", overrides=["bench.random_weights=true", *args.override]))
    device = torch.device("cuda")
    policy, tokenizer, description = load_bench_model(cfg, device)
    problems = make_sampler(cfg.run).sample(cfg.run.prompts_per_step)
    rows = [p for p in problems for _ in range(cfg.run.grpo.group_size)]
    prompts = [prompt_ids(tokenizer, p) for p in rows]
    caps = [int(cfg.run.sampling.max_new_tokens[p.task]) for p in rows]
    request = dict(prompts=prompts, max_new_tokens=caps, temperature=1.0, pad_id=tokenizer.pad_id,
                   stop_ids=(tokenizer.eos_id, tokenizer.newline_id))
    print(f"{torch.cuda.get_device_name()} | {description} | {len(rows)} rows, prompt widths "
          f"{min(map(len, prompts))}..{max(map(len, prompts))}, {max(caps)} new tokens, stops ignored", flush=True)
    results = []
    if args.baseline:
        decoder = load_baseline(args.baseline)(policy, ignore_stops=True)
        results.append(("baseline " + args.baseline, time_decoder(decoder, request, args.warmup, args.repeats)))
        decoder.close()
        print(f"{results[-1][0]}: median {statistics.median(results[-1][1]) * 1e3:.1f} ms", flush=True)
    defaults = {name: getattr(decode_kernels, name) for name in
                ("ATTENTION_BLOCK", "ATTENTION_WARPS", "LINEAR_BLOCK_N", "LINEAR_BLOCK_K",
                 "LINEAR_PROGRAMS", "LINEAR_MAX_SPLITS", "LINEAR_WARPS", "NORM_WARPS", "USE_PDL", "PDL_TRIGGER")}
    for text in args.layouts:
        for name, value in {**defaults, **parse_layout(text)}.items():
            setattr(decode_kernels, name, value)
        decoder = StaticDecoder(policy, ignore_stops=True)
        try:
            times = time_decoder(decoder, request, args.warmup, args.repeats)
        except Exception as error:  # a layout Triton cannot compile: reported, the sweep goes on
            print(f"{text}: {type(error).__name__}: {str(error)[:200]}", flush=True)
            decoder.close()
            continue
        results.append((f"{text} splits={decoder.splits}", times))
        print(f"{results[-1][0]}: median {statistics.median(times) * 1e3:.1f} ms", flush=True)
        if args.profile and text == args.layouts[0]:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                decoder.generate(generator=torch.Generator(device="cuda").manual_seed(0), **request)
                torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=25,
                                            max_name_column_width=60))
        decoder.close()
    if args.phases:
        results += generation_phases(policy, request, args.repeats)
    if args.trainer_steps:
        results += trainer_generation(cfg, policy, tokenizer, request, args.trainer_steps)
    print(f"\n{'layout':<90}{'median ms':>10}{'min':>8}{'max':>8}")
    for name, times in results:
        print(f"{name:<90}{statistics.median(times) * 1e3:>10.1f}{min(times) * 1e3:>8.1f}{max(times) * 1e3:>8.1f}")


if __name__ == "__main__":
    main()
