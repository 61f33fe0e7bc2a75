"""`python -m rookworld.commands.repeats [overrides]`: how often a run's A: training transitions repeat.

Composes the config as `python -m rookworld.train` would, draws the run's training problems with its
sampler (steps x prompts_per_step in the task mix) and counts the A: transitions (FEN, history, move)
it meets: the most times one repeats, overall and per case, with each pool's size.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass

from omegaconf import DictConfig

from rookworld.app.config import compose
from rookworld.data.arbiter_stream import ArbiterStream
from rookworld.data.positions import ProblemSampler, load_arbiter_problems, load_policy_problems


@dataclass
class CaseRepeats:
    case: str
    draws: int
    distinct: int
    most: int          # the most times one transition of this case is drawn
    pool: int | None   # pool size (None: drawn on the fly)


def arbiter_draws(cfg: DictConfig) -> tuple[ArbiterStream, int]:
    """The A: stream of `cfg` and how many of its problems a run of `cfg` draws."""
    stream = load_arbiter_problems("train", cfg.data)
    if not isinstance(stream, ArbiterStream):
        raise ValueError(f"data.kind={cfg.data.kind}: A: training rows are a fixed list, not the stream")
    sampler = ProblemSampler(load_policy_problems("train", cfg.data), stream, weights=dict(cfg.task_mix),
                             seed=cfg.seed)
    draws = 0
    for _ in range(int(cfg.steps)):
        draws += sum(problem.task == "A" for problem in sampler.sample(int(cfg.prompts_per_step)))
    return stream, draws


def repeats(stream: ArbiterStream, draws: int) -> list[CaseRepeats]:
    """Per case drawn (illegal moves by kind), how often its transitions repeat in the first `draws`."""
    by_case: dict[str, Counter] = {}
    for index in range(draws):
        by_case.setdefault(stream.drawn_case(index), Counter())[stream.transition(index)] += 1
    pool_sizes = {("illegal:" if case == "missing_promotion" else "") + case: len(pool)
                  for case, pool in stream.pools.items()}
    return [CaseRepeats(case, sum(c.values()), len(c), max(c.values()), pool_sizes.get(case))
            for case, c in sorted(by_case.items())]


def main(argv: list[str] | None = None) -> None:
    cfg = compose(list(sys.argv[1:] if argv is None else argv))
    stream, draws = arbiter_draws(cfg)
    rows = repeats(stream, draws)
    print(f"{draws} A: draws in {cfg.steps} steps of {cfg.prompts_per_step} problems "
          f"(task_mix A={cfg.task_mix.A}); the most repeats of one transition: {max(r.most for r in rows)}")
    print("| case | draws | distinct | most repeats | pool |\n|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r.case} | {r.draws} | {r.distinct} | {r.most} | {r.pool if r.pool is not None else 'on the fly'} |")


if __name__ == "__main__":
    main()
