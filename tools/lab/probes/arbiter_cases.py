"""What a starting model gets wrong on the held-out A: transitions, by move case (the `case` of each
bundled validation transition), greedily and over sampled completions: which kinds GRPO can fix fast.

    python3 tools/lab/probes/arbiter_cases.py [--problems 128] [--samples 8] [OVERRIDE ...]

OVERRIDEs compose over experiment=quickstart (the quickstart's model, token caps, reward and sampling).
Prints per case: the greedy rate of each A: criterion (format, next_state, reward, terminated,
truncated), then the same rates over `--samples` sampled completions per transition, their mean
reward and the share of transitions whose sampled rewards vary (a group GRPO can learn from). A
criterion that greedy decoding misses but sampling sometimes gets right is one GRPO can raise in a few
steps; one that sampling (almost) never gets right is not.
"""
import argparse
from collections import defaultdict
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

import rookworld.app.config  # noqa: F401  (registers the ${rookworld.asset:} resolver)
from rookworld.run.build import load_policy
from rookworld.app.config import build, load_run
from rookworld.data.positions import BUNDLED, load_arbiter_problems
from rookworld.data.records import read_jsonl
from rookworld.model.fast_sampling import make_decoder
from rookworld.judge.rollout import decode_completions, generate_for_problems
from rookworld.tasks import score_heldout

CONF_DIR = str(Path(__file__).resolve().parents[3] / "conf")
CRITERIA = ("format", "next_state", "reward", "terminated", "truncated")


def rates_by_case(cases, rows_per_problem):
    """{case: {criterion: mean}} over every row of every problem of that case."""
    sums, counts = defaultdict(lambda: defaultdict(float)), defaultdict(int)
    for case, rows in zip(cases, rows_per_problem):
        for row in rows:
            counts[case] += 1
            for key, value in row.items():
                sums[case][key] += value
    return {case: {k: v / counts[case] for k, v in sums[case].items()} for case in sorted(sums)}


def print_table(title, cases, table, keys):
    print(f"{title}\ncase               n  " + " ".join(f"{k:>10}" for k in keys))
    for case, rates in table.items():
        print(f"{case:<17} {cases.count(case):>3}  " + " ".join(f"{rates.get(k, 0.0):>10.3f}" for k in keys))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=128, help="the first N held-out A: transitions")
    parser.add_argument("--samples", type=int, default=8, help="sampled completions per transition (0: greedy only)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    with initialize_config_dir(config_dir=CONF_DIR):
        cfg = compose("config", overrides=["experiment=quickstart", "tracking=none", *args.overrides])
    torch.manual_seed(cfg.seed)
    policy, tokenizer = load_policy(load_run(cfg).model, torch.device("cpu"))
    problems = load_arbiter_problems("validation", cfg.data)[: args.problems]
    cases = [row["case"] for row in read_jsonl(BUNDLED["arbiter_validation"])][: args.problems]
    decoder, caps, reward = make_decoder(policy, check_every=16), dict(cfg.sampling.max_new_tokens), build(cfg.reward).build()

    def scored(problem, completion):
        scores = score_heldout(problem, completion)
        return {k: scores[k] for k in CRITERIA} | {"reward_total": reward(problem, completion).total}

    with torch.no_grad():
        greedy = decode_completions(tokenizer, generate_for_problems(decoder, tokenizer, problems, caps, greedy=True))
        print_table(f"greedy, first {len(problems)} held-out A: transitions", cases,
                    rates_by_case(cases, [[scored(p, c)] for p, c in zip(problems, greedy)]), CRITERIA)
        if args.samples:
            g, s = args.samples, cfg.sampling
            rows = [p for p in problems for _ in range(g)]
            sampled = decode_completions(tokenizer, generate_for_problems(
                decoder, tokenizer, rows, caps, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p))
            per_problem = [[scored(p, c) for c in sampled[i * g:(i + 1) * g]] for i, p in enumerate(problems)]
            for rows_of_problem in per_problem:
                varies = float(len({r["reward_total"] for r in rows_of_problem}) > 1)
                for r in rows_of_problem:
                    r["varies"] = varies
            print_table(f"\nsampled, {g} completions each", cases, rates_by_case(cases, per_problem),
                        (*CRITERIA, "reward_total", "varies"))


if __name__ == "__main__":
    main()
