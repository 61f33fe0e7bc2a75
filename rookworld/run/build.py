"""The one assembly of a GRPO run: its RunSpec (rookworld/specs/run.py) to the parts each group's spec builds
(policy, reference, training sampler, held-out problems, KL controller, detectors, learner) and the Trainer that
holds them. Nothing below it reads a RunSpec. Shared by the training command, the supervised warm start and the
benchmarks."""
from __future__ import annotations

import copy
from functools import partial

import torch

from rookworld import final_pool
from rookworld.data.arbiter_stream import ArbiterStream, case_counts
from rookworld.stats.blocks import game_blocks
from rookworld.data.move_cases import move_case
from rookworld.data.positions import ProblemSampler, load_arbiter_problems, load_policy_problems
from rookworld.data.records import HELD_OUT_SPLITS, position_key
from rookworld.grpo.learner import Learner, UpdateSettings
from rookworld.model.hub import load_model
from rookworld.run.resume import resume_point
from rookworld.specs.data import Data
from rookworld.specs.eval import Eval
from rookworld.specs.kl import KL
from rookworld.specs.model import Model
from rookworld.specs.rules import ConfigError, require, resolve_device
from rookworld.specs.run import RunSpec
from rookworld.run.trainer import LoopSettings, Trainer


def build_run(spec: RunSpec, tracker, hooks: list | None = None) -> Trainer:
    """The Trainer of `spec` (it resumes itself when spec.resume_from is set); `hooks`: its StepHooks."""
    device = resolve_device(spec.device)
    if device.type == "cpu" and spec.cpu_threads is not None:
        torch.set_num_threads(spec.cpu_threads)
    parts = heldout_problems(spec.eval.split, spec.data)
    heldout = eval_problems(spec.eval, *parts, seed=spec.seed)  # its errors before the model loads
    sampler = make_sampler(spec)
    if spec.reward.needs_action_values:
        for problems, split in ((sampler.problems["P"], "train"), (heldout, spec.eval.split)):
            require_move_values(problems, positions_of(spec.data, split), "reward=move_value")
    print(f"loading {spec.model.describe()} on {device}"
          + (f" ({_threads(torch.get_num_threads())})" if device.type == "cpu" else "")
          + f"; {spec.end_step} steps, {len(heldout)} held-out problems evaluated at step 0"
          + (" and the end" if spec.eval.every == 0 else f", every {spec.eval.every} steps and the end"), flush=True)
    policy, tokenizer = load_policy(spec.model, device)
    return assemble(spec, policy, tokenizer, sampler=sampler, heldout=heldout, tracker=tracker, hooks=list(hooks or []))


def assemble(spec: RunSpec, policy: torch.nn.Module, tokenizer, **trainer_fields) -> Trainer:
    """The Trainer of `spec` around a loaded `policy`: the parts each group's spec builds, and the checked
    checkpoint it resumes from; `trainer_fields`: the sampler, held-out problems, tracker and the rest of the
    Trainer's own fields."""
    reference = make_reference(policy, spec.kl, next(policy.parameters()).device)
    learner = build_learner(spec, policy, reference, tokenizer)
    return Trainer(settings=loop_settings(spec), policy=policy, tokenizer=tokenizer, reference=reference,
                   reward_fn=spec.reward.build(), kl=spec.kl.build(), guards=spec.guards.build(spec.kl),
                   learner=learner, resume=resume_point(spec), **trainer_fields)


def loop_settings(spec: RunSpec) -> LoopSettings:
    """What the Trainer's loop reads of `spec`."""
    return LoopSettings(seed=spec.seed, steps=spec.steps, end_step=spec.end_step, time_limit_min=spec.time_limit_min,
                        prompts_per_step=spec.prompts_per_step, log_every=spec.log_every, grpo=spec.grpo,
                        sampling=spec.sampling, eval=spec.eval, objective=spec.objective, checkpoint=spec.checkpoint,
                        log_checkpoint=spec.tracking.log_checkpoint,
                        keep_finite_weights=spec.guards.keep_finite_weights,
                        kl_reward_estimator=spec.kl.reward_estimator, dtype=spec.model.dtype, resolved=spec.resolved)


def build_learner(spec: RunSpec, policy: torch.nn.Module, reference: torch.nn.Module | None, tokenizer) -> Learner:
    """The update engine of `spec` for `policy` (and its frozen `reference`, KL on)."""
    g = spec.grpo
    settings = UpdateSettings(loss=g.loss_settings(spec.kl), loss_type=g.loss_type, num_iterations=g.num_iterations,
                              num_minibatches=g.num_minibatches, micro_batch_size=g.micro_batch_size,
                              max_grad_norm=g.max_grad_norm, mask_truncated_completions=g.mask_truncated_completions,
                              activation_checkpointing=g.activation_checkpointing, cuda_graphs=g.cuda_graphs,
                              graph_bucket=g.graph_bucket, temperature=spec.sampling.temperature,
                              max_completion_length=max(spec.sampling.max_new_tokens.values()),
                              kl_in_reward=spec.kl.reward_estimator is not None,
                              reference_sync_every=spec.kl.sync_every, reference_sync_alpha=spec.kl.sync_alpha,
                              dtype=spec.model.dtype, shuffle_seed=spec.seed + 1)
    device = next(policy.parameters()).device
    return Learner(settings, policy, reference, tokenizer, optimizer=spec.optimizer.build(policy.parameters()),
                   lr_at=partial(spec.optimizer.lr_at, total_steps=spec.steps), entropy_bonus=spec.grpo.entropy.build(device))


def require_move_values(problems: list, where: str, needed_by: str) -> None:
    """`needed_by` (reward=move_value, eval.score=chess) scores P: answers from every legal move's value: a
    ConfigError naming `where` (the data file or part) and the first P: position of `problems` without action
    values, or whose values are not its legal moves (read before the run starts, so no score meets a bad list)."""
    for problem in (p for p in problems if p.task == "P"):
        if problem.truth.action_values is None:
            raise ConfigError(f"{needed_by} needs action_values on every P: position: {where} has none for "
                              f"{problem.truth.fen!r} (docs/rewards.md: the move-value data)")
        try:
            problem.truth.move_values
        except ValueError as error:
            raise ConfigError(f"{where}: {error}") from None


def positions_of(data: Data, split: str) -> str:
    """Where the P: positions of part `split` of `data` come from, for an error message."""
    return data.as_mapping().get(f"policy_{split}") or f"the {data.kind} {split} positions"


def _threads(count: int) -> str:
    return "1 thread" if count == 1 else f"{count} threads"


def heldout_keys(data: Data) -> frozenset[str]:
    """The position keys of both held-out parts of `data` and of the final pool: no training problem or document
    is made from them."""
    return frozenset(position_key(p.truth.fen) for split in HELD_OUT_SPLITS for part in heldout_problems(split, data)
                     for p in part) | final_pool.position_keys()


def heldout_problems(split: str, data: Data) -> tuple[list, list]:
    """The held-out P: and A: problems of part `split` of `data`."""
    source = data.as_mapping()
    return load_policy_problems(split, source), load_arbiter_problems(split, source)


def eval_problems(eval_spec: Eval, policy_heldout: list, arbiter_heldout: list, *, seed: int) -> list:
    """The held-out problems evaluated (of the part eval.split names): the first eval.num_policy P: ones,
    and the first eval.num_arbiter A: ones or, with eval.arbiter_cases, that many in those case shares; with
    eval.draw=blocks, block `seed` (modulo the blocks the part holds) of each task's seeded shuffle."""
    if eval_spec.draw == "blocks":
        chosen = (draw_block(policy_heldout, eval_spec.num_policy, seed, "policy")
                  + draw_block(arbiter_heldout, eval_spec.num_arbiter, seed, "arbiter"))
    elif eval_spec.arbiter_cases is None:
        chosen = policy_heldout[: eval_spec.num_policy] + arbiter_heldout[: eval_spec.num_arbiter]
    else:
        chosen = policy_heldout[: eval_spec.num_policy] + _first_of_each_case(arbiter_heldout, eval_spec)
    if eval_spec.score == "chess":
        require_move_values(chosen, f"the {eval_spec.split} part", "eval.score=chess")
    return chosen


def draw_block(problems: list, size: int, seed: int, task: str) -> list:
    """Block `seed` of the part's blocks of whole games (rookworld/stats/blocks.py: the same for every run, no game
    in two of them); seeds beyond the blocks the part holds wrap round."""
    if size == 0:
        return []
    blocks = game_blocks([p.game for p in problems], size)
    require(bool(blocks), f"eval.num_{task}", size, f"the held-out part holds {len(problems)}: no block of {size}")
    return [problems[i] for i in blocks[seed % len(blocks)]]


def _first_of_each_case(problems: list, eval_spec: Eval) -> list:
    """eval.num_arbiter of `problems` in the eval.arbiter_cases shares, the first of each case in their
    order; a ConfigError when the held-out part has fewer of a case than its share asks."""
    counts = case_counts(eval_spec.arbiter_cases, eval_spec.num_arbiter)
    taken, chosen = dict.fromkeys(counts, 0), []
    for problem in problems:
        case = move_case(problem.truth.fen, problem.truth.move)
        if taken.get(case, 0) < counts.get(case, 0):
            taken[case] += 1
            chosen.append(problem)
    for case, count in counts.items():
        require(taken[case] == count, f"eval.arbiter_cases.{case}", eval_spec.arbiter_cases[case],
                f"{count} of eval.num_arbiter={eval_spec.num_arbiter} asked, the held-out {eval_spec.split} "
                f"part has {taken[case]}")
    return chosen


def make_sampler(spec: RunSpec) -> ProblemSampler:
    """Training problems of `spec.data`, drawn in the `spec.task_mix` shares."""
    source = spec.data.as_mapping()
    arbiter = load_arbiter_problems("train", source)
    if isinstance(arbiter, ArbiterStream):  # its random walks may reach a held-out or final-pool position
        arbiter = arbiter.excluding(heldout_keys(spec.data))
    return ProblemSampler(load_policy_problems("train", source), arbiter,
                          weights=spec.task_mix.weights(), seed=spec.seed, difficulty=spec.difficulty.build(spec.seed))


def load_policy(model: Model, device: torch.device, path: str | None = None):
    """Weights in float32 (the optimizer's master copy); bf16 is applied by autocast on CUDA."""
    arguments = model.load_arguments()
    if path:
        arguments["path"] = path
    return load_model(**arguments, device=device, dtype="float32")


def make_reference(policy: torch.nn.Module, kl: KL, device: torch.device):
    """A frozen copy of the starting policy, in the same precision (KL is 0 before any update)."""
    if not kl.needs_reference:
        return None
    target = device if kl.ref_device == "same" else torch.device(kl.ref_device)
    return copy.deepcopy(policy).to(target).eval().requires_grad_(False)
