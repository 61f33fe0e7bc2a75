"""`python -m rookworld.train [overrides]`: one GRPO run composed from conf/.

Returns the RunResult: its `objective` (eval/score at the end, or objective.failure_penalty for a
failed outcome) is what the Optuna sweeper optimises, its `outcome` what the study records.
"""
from __future__ import annotations

import copy
import sys

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from rookworld.config import PROJECT_TARGETS, ConfigError, build, resolve_device, validate
from rookworld.data.positions import ProblemSampler, load_arbiter_problems, load_policy_problems
from rookworld.model.hub import ModelLoadError, load_model
from rookworld.tracking import TrackingError, make_tracker
from rookworld.trainer import TRAINER_STATE_FILE, RunResult, Trainer

USER_ERRORS = (ConfigError, ModelLoadError, TrackingError, FileNotFoundError)


def build_trainer(cfg: DictConfig, tracker) -> Trainer:
    device = resolve_device(cfg.device)
    policy, tokenizer = load_policy(cfg.model, device)
    reference = make_reference(policy, cfg.kl, device)
    if cfg.resume_from:
        policy, _ = load_policy(cfg.model, device, path=cfg.resume_from)
    data = cfg.data
    sampler = make_sampler(cfg)
    heldout = eval_problems(cfg.eval, load_policy_problems("heldout", data), load_arbiter_problems("heldout", data))
    trainer = Trainer(cfg=cfg, policy=policy, tokenizer=tokenizer, reference=reference,
                      reward_fn=build(cfg.reward), sampler=sampler, heldout=heldout,
                      tracker=tracker, hooks=build_hooks(cfg))
    if cfg.resume_from:
        trainer.load_state_dict(torch.load(f"{cfg.resume_from}/{TRAINER_STATE_FILE}", weights_only=False))
    return trainer


def eval_problems(eval_cfg: DictConfig, policy_heldout: list, arbiter_heldout: list) -> list:
    """The held-out problems evaluated: the first eval.num_policy P: and eval.num_arbiter A: ones."""
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


def build_hooks(cfg: DictConfig) -> list:
    if cfg.trial.get("number") is None:
        return []
    from rookworld.sweep.pruning import OptunaPruningHook
    return [OptunaPruningHook.from_config(cfg)]


def run(cfg: DictConfig) -> RunResult:
    validate(cfg)
    with make_tracker(cfg) as tracker:
        tracker.log_params(cfg)
        tracker.log_config_yaml(cfg)
        return build_trainer(cfg, tracker).fit()


def _in_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


@hydra.main(config_path="../conf", config_name="config", execution_whitelist=PROJECT_TARGETS)
def main(cfg: DictConfig) -> RunResult:
    try:
        return run(cfg)
    except USER_ERRORS as error:
        if _in_multirun():
            raise
        print(f"rookworld: error: {error}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
