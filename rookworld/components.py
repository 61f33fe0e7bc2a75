"""The parts of a GRPO run built from a composed config (conf/config.yaml): policy, reference,
training sampler, held-out problems, step hooks and the Trainer that holds them. Shared by the
training command, the supervised warm start and the benchmarks."""
from __future__ import annotations

import copy

import torch
from omegaconf import DictConfig

from rookworld.config import build, resolve_device
from rookworld.data.positions import ProblemSampler, load_arbiter_problems, load_policy_problems
from rookworld.hooks import build_step_hooks
from rookworld.model.hub import load_model
from rookworld.trainer import Trainer


def build_trainer(cfg: DictConfig, tracker) -> Trainer:
    """The Trainer of `cfg` (it resumes itself when cfg.resume_from is set)."""
    device = resolve_device(cfg.device)
    policy, tokenizer = load_policy(cfg.model, device)
    data = cfg.data
    split = cfg.eval.split
    heldout = eval_problems(cfg.eval, load_policy_problems(split, data), load_arbiter_problems(split, data))
    return Trainer(cfg=cfg, policy=policy, tokenizer=tokenizer, reference=make_reference(policy, cfg.kl, device),
                   reward_fn=build(cfg.reward), sampler=make_sampler(cfg), heldout=heldout,
                   tracker=tracker, hooks=build_step_hooks(cfg))


def eval_problems(eval_cfg: DictConfig, policy_heldout: list, arbiter_heldout: list) -> list:
    """The held-out problems evaluated: the first eval.num_policy P: and eval.num_arbiter A: ones (of
    the part eval.split names)."""
    return policy_heldout[: eval_cfg.num_policy] + arbiter_heldout[: eval_cfg.num_arbiter]


def make_sampler(cfg: DictConfig) -> ProblemSampler:
    """Training problems of `cfg.data`, drawn in the `cfg.task_mix` shares."""
    return ProblemSampler(load_policy_problems("train", cfg.data), load_arbiter_problems("train", cfg.data),
                          weights=dict(cfg.task_mix), seed=cfg.seed)


def load_policy(model: DictConfig, device: torch.device, path: str | None = None):
    """Weights in float32 (the optimizer's master copy); bf16 is applied by autocast on CUDA."""
    tiny = None if model.tiny is None else dict(model.tiny)
    return load_model(source=model.source, path=path or model.path, revision=model.revision,
                      device=device, dtype="float32", tiny=tiny)


def make_reference(policy: torch.nn.Module, kl: DictConfig, device: torch.device):
    """A frozen copy of the starting policy, in the same precision (KL is 0 before any update)."""
    if kl.kind == "none":
        return None
    target = device if kl.ref_device == "same" else torch.device(kl.ref_device)
    return copy.deepcopy(policy).to(target).eval().requires_grad_(False)

