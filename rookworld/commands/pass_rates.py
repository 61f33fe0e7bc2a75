"""`python -m rookworld.commands.pass_rates --out FILE [--problems N] [--batch B] [overrides]`: the starting
policy's pass rate on each P: training problem, the starting estimates of difficulty.pass_rates.

Composes the training config (as `python -m rookworld.train` would with the same overrides), loads its
model and samples grpo.group_size completions of each of the first N P: problems of data.policy_train
(all of them by default) with the run's sampling settings and seed; a problem's pass rate is the share
of its completions that solve it exactly (rookworld.tasks.solves). Writes one JSON line per problem,
{"prompt", "pass_rate"} (rookworld/data/difficulty.py reads it), and prints the distribution:
the shares that no completion solves, that every one does, and the rest.

    python -m rookworld.commands.pass_rates --out outputs/pass_rates.jsonl experiment=grpo_move_value model.path=MODEL
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch
from tqdm import tqdm

from rookworld.run.build import load_policy
from rookworld.app.composition import compose_command
from rookworld.app.config import load_run
from rookworld.data.difficulty import pass_rates_of, write_pass_rates
from rookworld.data.positions import load_policy_problems
from rookworld.app.errors import as_command
from rookworld.model.fast_sampling import make_decoder
from rookworld.model.precision import autocast_for
from rookworld.judge.rollout import decode_completions, generate_for_problems
from rookworld.specs.rules import resolve_device
from rookworld.tasks import solves


def measure(overrides: list[str], problems: int | None, batch: int) -> dict[str, float]:
    """{prompt: pass rate} of the first `problems` P: training problems (None: all) under the config."""
    spec = load_run(compose_command(overrides))
    device = resolve_device(spec.device)
    model, tokenizer = load_policy(spec.model, device)
    chosen = load_policy_problems("train", spec.data.as_mapping())[:problems]
    decoder = make_decoder(model, check_every=spec.sampling.finish_check_every)
    generator = torch.Generator(device=device).manual_seed(spec.seed)
    s, G = spec.sampling, spec.grpo.group_size
    rates: dict[str, float] = {}
    with tqdm(total=len(chosen), desc="problems", unit="problem") as bar:
        for start in range(0, len(chosen), batch):
            rows = [p for p in chosen[start:start + batch] for _ in range(G)]
            with torch.no_grad(), autocast_for(device, spec.model.dtype):
                rollout = generate_for_problems(decoder, tokenizer, rows, dict(s.max_new_tokens),
                                                temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
                                                generator=generator)
            texts = decode_completions(tokenizer, rollout)
            rates.update(pass_rates_of(rows, [solves(p, t) for p, t in zip(rows, texts)], G))
            bar.update(len(rows) // G)
    return rates


def distribution(rates: dict[str, float]) -> str:
    values = list(rates.values())
    never, always = sum(v == 0.0 for v in values), sum(v == 1.0 for v in values)
    between = len(values) - never - always
    share = lambda n: f"{n} ({n / max(1, len(values)):.1%})"  # noqa: E731
    return (f"{len(values)} problems: none solved {share(never)}, all solved {share(always)}, "
            f"in between {share(between)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rookworld.commands.pass_rates", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the pass-rate file to write (JSONL)")
    parser.add_argument("--problems", type=int, default=None, help="the first N P: training problems (default: all)")
    parser.add_argument("--batch", type=int, default=64, help="problems generated at once (x grpo.group_size rows)")
    parser.add_argument("overrides", nargs="*", help="config overrides, as for python -m rookworld.train")
    args = parser.parse_args(argv)
    if args.problems is not None and args.problems < 1:
        parser.error(f"--problems={args.problems}: at least one problem")
    if args.batch < 1:
        parser.error(f"--batch={args.batch}: at least one problem at a time")
    with as_command():  # a bad override or value: one line, exit 2
        rates = measure(args.overrides, args.problems, args.batch)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_pass_rates(args.out, rates)
    print(f"{distribution(rates)}; written to {args.out}")


if __name__ == "__main__":
    main()
