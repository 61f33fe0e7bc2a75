"""Config validation at the boundary: every bad value fails before any model loads, in one line."""
from __future__ import annotations

import math

import torch
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from rookworld.data.arbiter_stream import check_case_shares
from rookworld.data.positions import DATA_KINDS, HELDOUT_SOURCES
from rookworld.data.records import HELD_OUT_SPLITS
from rookworld.grpo.advantages import ADVANTAGE_STDS, REWARD_AGGREGATIONS, SCALE_REWARDS
from rookworld.grpo.kl import ESTIMATORS, PLACEMENTS
from rookworld.grpo.sampler_correction import MODES as SAMPLER_CORRECTIONS
from rookworld.grpo.loss import LOSS_TYPES
from rookworld.tracking import BACKENDS as TRACKING_BACKENDS

KL_KINDS = ("none", "fixed", "adaptive")
DTYPES = ("auto", "float32", "bfloat16")
OPTIMIZERS = ("adamw", "sgd")
SAVE_DTYPES = ("float32", "bfloat16")
PROJECT_TARGETS = "rookworld.*"
ASSETS_DIR = Path(__file__).parent / "assets"
CONF_DIR = Path(__file__).resolve().parents[1] / "conf"

# `${rookworld.asset:NAME}` in a config: a file or folder shipped in rookworld/assets/.
def _asset(name: str) -> str:
    return str(ASSETS_DIR / name)


OmegaConf.register_resolver("rookworld.asset", _asset, replace=True)


def compose(overrides: list[str], config_name: str = "config") -> DictConfig:
    """conf/<config_name>.yaml with `overrides`, as the entry points compose it (sweeps=NAME too)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR)):
        return hydra_compose(config_name, overrides=overrides, return_hydra_config=True)


class ConfigError(ValueError):
    """A config value the run cannot start with; the message names the key and the value."""


def require(ok: bool, key: str, value, rule: str) -> None:
    """Raise ConfigError("key=value: rule") unless ok."""
    if not ok:
        raise ConfigError(f"{key}={value!r}: {rule}")


def _validate_grpo_v2(g: DictConfig, reward: DictConfig, k: DictConfig) -> None:
    """The knobs of the loss and the batch beyond the GRPO paper's (conf/grpo/default.yaml)."""
    _one_of("grpo.reward_aggregation", g.reward_aggregation, REWARD_AGGREGATIONS)
    if g.reward_aggregation == "normalize_then_sum":
        require(str(reward._target_).endswith("GraduatedReward"), "grpo.reward_aggregation", g.reward_aggregation,
                "needs reward=graduated (a weighted sum of criteria)")
        require(not g.reward_norm.enabled, "grpo.reward_aggregation", g.reward_aggregation,
                "normalises the criteria itself: turn grpo.reward_norm.enabled off")
        require(k.kind == "none" or k.placement == "loss", "grpo.reward_aggregation", g.reward_aggregation,
                "takes no KL in the reward: use kl.placement=loss")
    for key in ("mask_truncated_completions", "entropy.adaptive", "dynamic_sampling.enabled"):
        value = OmegaConf.select(g, key)
        require(isinstance(value, bool), f"grpo.{key}", value, "must be true or false")
    require(_is_number(g.top_entropy_quantile) and 0 < g.top_entropy_quantile <= 1, "grpo.top_entropy_quantile",
            g.top_entropy_quantile, "must be in (0, 1]")
    e = g.entropy
    for key in ("coef", "target", "delta", "min", "max"):
        require(_is_number(e[key]) and e[key] >= 0, f"grpo.entropy.{key}", e[key], "must be a number >= 0")
    require(e.min <= e.max, "grpo.entropy.min", e.min, f"must be <= grpo.entropy.max={e.max}")
    require(isinstance(g.dynamic_sampling.max_rounds, int) and g.dynamic_sampling.max_rounds >= 1,
            "grpo.dynamic_sampling.max_rounds", g.dynamic_sampling.max_rounds, "must be an integer >= 1")
    _one_of("grpo.sampler_correction.mode", g.sampler_correction.mode, SAMPLER_CORRECTIONS)
    require(_is_number(g.sampler_correction.cap) and g.sampler_correction.cap >= 1, "grpo.sampler_correction.cap",
            g.sampler_correction.cap, "must be a number >= 1")


def _one_of(key: str, value, options: tuple) -> None:
    require(value in options, key, value, f"expected one of {', '.join(options)}")


def validate(cfg: DictConfig) -> None:
    g, k, o, s = cfg.grpo, cfg.kl, cfg.optimizer, cfg.sampling
    require(isinstance(g.group_size, int) and g.group_size >= 2, "grpo.group_size", g.group_size,
             "must be an integer >= 2 (advantages compare completions within a group)")
    _one_of("grpo.scale_rewards", g.scale_rewards, SCALE_REWARDS)
    _one_of("grpo.advantage_std", g.advantage_std, ADVANTAGE_STDS)
    _one_of("grpo.loss_type", g.loss_type, LOSS_TYPES)
    require(g.reward_norm.momentum is not None and 0 <= g.reward_norm.momentum < 1, "grpo.reward_norm.momentum",
            g.reward_norm.momentum, "must be in [0, 1)")
    require(0 <= g.epsilon_low < 1, "grpo.epsilon_low", g.epsilon_low, "must be in [0, 1)")
    require(g.epsilon_high >= 0, "grpo.epsilon_high", g.epsilon_high, "must be >= 0")
    require(g.num_iterations >= 1, "grpo.num_iterations", g.num_iterations, "must be >= 1")
    batch = cfg.prompts_per_step * g.group_size
    require(1 <= g.num_minibatches <= batch, "grpo.num_minibatches", g.num_minibatches,
             f"must be between 1 and prompts_per_step * group_size = {batch}")
    require(g.micro_batch_size >= 0, "grpo.micro_batch_size", g.micro_batch_size, "must be >= 0")
    require(g.max_grad_norm >= 0, "grpo.max_grad_norm", g.max_grad_norm, "must be >= 0 (0 = off)")
    require(isinstance(g.cuda_graphs, bool), "grpo.cuda_graphs", g.cuda_graphs, "must be true or false")
    require(isinstance(g.graph_bucket, int) and g.graph_bucket >= 1, "grpo.graph_bucket", g.graph_bucket,
            "must be an integer >= 1")
    _validate_grpo_v2(g, cfg.reward, k)
    _validate_optimizer(o)
    _one_of("kl.kind", k.kind, KL_KINDS)
    _one_of("kl.estimator", k.estimator, ESTIMATORS)
    _one_of("kl.placement", k.placement, PLACEMENTS)
    require(isinstance(k.bias_correction, bool), "kl.bias_correction", k.bias_correction, "must be true or false")
    require(k.coef >= 0, "kl.coef", k.coef, "must be >= 0")
    require(k.sync_every >= 0, "kl.sync_every", k.sync_every, "must be >= 0 (0 = never)")
    require(0 <= k.sync_alpha <= 1, "kl.sync_alpha", k.sync_alpha, "must be in [0, 1]")
    if k.kind == "adaptive":
        require(k.coef > 0, "kl.coef", k.coef, "adaptive KL needs a starting coef > 0 (it scales multiplicatively)")
        require(k.target is not None and k.target > 0, "kl.target", k.target, "adaptive KL needs a target > 0")
        require(k.horizon is not None and k.horizon > 0, "kl.horizon", k.horizon, "adaptive KL needs a horizon > 0")
    require(k.max is None or k.max > 0, "kl.max", k.max, "must be > 0 or null (guard off)")
    require(k.max_steps_above >= 1, "kl.max_steps_above", k.max_steps_above, "must be >= 1")
    require(k.ref_device == "same" or _is_device(k.ref_device), "kl.ref_device", k.ref_device,
             "expected same, cpu or cuda:N")
    _validate_task_mix(cfg.task_mix)
    _validate_data(cfg.data)
    require(s.temperature >= 0, "sampling.temperature", s.temperature, "must be >= 0 (0 = greedy)")
    require(s.top_k >= 0, "sampling.top_k", s.top_k, "must be >= 0 (0 = off)")
    require(0 < s.top_p <= 1, "sampling.top_p", s.top_p, "must be in (0, 1]")
    require(isinstance(s.finish_check_every, int) and s.finish_check_every >= 1, "sampling.finish_check_every",
            s.finish_check_every, "must be an integer >= 1")
    for task, cap in s.max_new_tokens.items():
        require(cap >= 1, f"sampling.max_new_tokens.{task}", cap, "must be >= 1")
    require(cfg.steps >= 0, "steps", cfg.steps, "must be >= 0")
    require(cfg.prompts_per_step >= 1, "prompts_per_step", cfg.prompts_per_step, "must be >= 1")
    require(cfg.log_every >= 1, "log_every", cfg.log_every, "must be >= 1")
    require(cfg.time_limit_min is None or cfg.time_limit_min > 0, "time_limit_min", cfg.time_limit_min,
            "must be > 0 or null (no limit)")
    _one_of("eval.split", cfg.eval.split, HELD_OUT_SPLITS)
    require(cfg.eval.every >= 0, "eval.every", cfg.eval.every, "must be >= 0 (0 = only at the start and the end)")
    require(cfg.eval.batch_size >= 1, "eval.batch_size", cfg.eval.batch_size, "must be >= 1")
    require(cfg.eval.cache_dir is None or (isinstance(cfg.eval.cache_dir, str) and cfg.eval.cache_dir.strip() != ""),
            "eval.cache_dir", cfg.eval.cache_dir, "must be a folder or null (no cache)")
    require(cfg.checkpoint.every >= 0, "checkpoint.every", cfg.checkpoint.every, "must be >= 0 (0 = off)")
    require(cfg.device == "auto" or _is_device(cfg.device), "device", cfg.device,
             "expected auto, cpu, cuda or cuda:N")
    resolve_device(cfg.device)  # cuda on a machine without CUDA fails here, before any run opens
    if k.ref_device != "same":
        _require_available(k.ref_device, "kl.ref_device", "same or cpu")
    _one_of("model.dtype", cfg.model.dtype, DTYPES)
    _validate_tracking(cfg.tracking)
    _validate_guards(cfg.guards)
    _validate_resume_check(cfg.resume_check)


def validate_bench(cfg: DictConfig) -> None:
    """`python -m rookworld.bench`: the training config plus the `bench` knobs."""
    validate(cfg)
    b = cfg.bench
    _one_of("bench.decoder", b.decoder, ("fast", "plain"))
    for key in ("random_weights", "trl"):
        _one_of(f"bench.{key}", str(b[key]).lower(), ("auto", "true", "false"))
    for key, least in (("steps", 1), ("warmup", 0), ("compare_plain_steps", 0), ("trials", 0),
                       ("trial_steps", 1), ("trl_steps", 1)):
        require(isinstance(b[key], int) and b[key] >= least, f"bench.{key}", b[key], f"must be an integer >= {least}")


def validate_sft(cfg: DictConfig) -> None:
    """`python -m rookworld.sft`: its own knobs, the optimizer, the data and tracking."""
    s = cfg.sft
    for key in ("steps", "batch_size", "seq_len", "heldout_docs", "log_every"):
        require(isinstance(s[key], int) and s[key] >= 1, f"sft.{key}", s[key], "must be an integer >= 1")
    require(isinstance(s.eval_every, int) and s.eval_every >= 0, "sft.eval_every", s.eval_every,
            "must be an integer >= 0 (0 = only at the end)")
    require(s.max_grad_norm >= 0, "sft.max_grad_norm", s.max_grad_norm, "must be >= 0 (0 = off)")
    require(0 <= s.arbiter_fraction <= 1, "sft.arbiter_fraction", s.arbiter_fraction, "must be in [0, 1]")
    require(s.num_workers >= 0, "sft.num_workers", s.num_workers, "must be >= 0")
    require(s.time_limit_min is None or s.time_limit_min > 0, "sft.time_limit_min", s.time_limit_min,
            "must be > 0 or null (no limit)")
    _one_of("sft.save_dtype", s.save_dtype, SAVE_DTYPES)
    _one_of("eval.split", cfg.eval.split, HELD_OUT_SPLITS)
    require(cfg.device == "auto" or _is_device(cfg.device), "device", cfg.device,
            "expected auto, cpu, cuda or cuda:N")
    _validate_optimizer(cfg.optimizer)
    _validate_data(cfg.data)
    _validate_tracking(cfg.tracking)


def _validate_optimizer(o: DictConfig) -> None:
    _one_of("optimizer.name", o.name, OPTIMIZERS)
    require(isinstance(o.lr, (int, float)) and o.lr > 0 and math.isfinite(o.lr), "optimizer.lr", o.lr,
            "must be a positive finite number")
    require(o.warmup_steps >= 0, "optimizer.warmup_steps", o.warmup_steps, "must be >= 0")
    require(0 <= o.min_lr_ratio <= 1, "optimizer.min_lr_ratio", o.min_lr_ratio, "must be in [0, 1]")


def _validate_data(data: DictConfig) -> None:
    _one_of("data.kind", data.kind, DATA_KINDS)
    if data.kind == "rookworld7m":
        _one_of("data.heldout", data.heldout, HELDOUT_SOURCES)
    else:
        try:
            check_case_shares(dict(data.arbiter_cases))
        except ValueError as error:
            raise ConfigError(str(error)) from None
        require(data.arbiter_pool_size >= 1, "data.arbiter_pool_size", data.arbiter_pool_size, "must be >= 1")
        require(data.arbiter_pool_walks >= 1, "data.arbiter_pool_walks", data.arbiter_pool_walks, "must be >= 1")


def _validate_tracking(tracking: DictConfig) -> None:
    _one_of("tracking.backend", tracking.backend, TRACKING_BACKENDS)
    if tracking.backend != "mlflow":
        return
    for key in ("flush_interval_s", "connect_timeout_s"):
        require(_is_number(tracking[key]) and tracking[key] > 0, f"tracking.{key}", tracking[key], "must be > 0")
    require(isinstance(tracking.param_value_max, int) and tracking.param_value_max >= 4,
            "tracking.param_value_max", tracking.param_value_max, "must be an integer >= 4 (room for '...')")


def _validate_guards(guards: DictConfig) -> None:
    """conf/guards/: every window an integer >= 0 (0 = detector off), every threshold a positive number."""
    _require_int(guards.max_nonfinite_steps, "guards.max_nonfinite_steps", 1)
    require(isinstance(guards.keep_finite_weights, bool), "guards.keep_finite_weights", guards.keep_finite_weights,
            "must be true or false")
    for name in ("kl_growth", "entropy", "grad_norm", "reward"):
        _require_int(guards[name].window, f"guards.{name}.window", 0, " (0 = off)")
    g, e, n, r = guards.kl_growth, guards.entropy, guards.grad_norm, guards.reward
    require(_is_number(g.factor) and g.factor > 1, "guards.kl_growth.factor", g.factor, "must be a number > 1")
    require(_is_number(g.min_fraction) and 0 < g.min_fraction <= 1, "guards.kl_growth.min_fraction", g.min_fraction,
            "must be in (0, 1] (a fraction of kl.max)")
    require(_is_number(e.min_ratio) and 0 < e.min_ratio < 1, "guards.entropy.min_ratio", e.min_ratio,
            "must be in (0, 1)")
    require(_is_number(n.factor) and n.factor > 1, "guards.grad_norm.factor", n.factor, "must be a number > 1")
    _require_int(n.steps_above, "guards.grad_norm.steps_above", 1)
    require(_is_number(r.drop) and r.drop > 0, "guards.reward.drop", r.drop, "must be a number > 0")


def _validate_resume_check(check: DictConfig) -> None:
    may_change = check.may_change
    require(OmegaConf.is_list(may_change) and all(isinstance(p, str) and p for p in may_change),
            "resume_check.may_change", may_change, "must be a list of key patterns")
    require(isinstance(check.accept_changes, bool), "resume_check.accept_changes", check.accept_changes,
            "must be true or false")


def _require_int(value, key: str, least: int, note: str = "") -> None:
    require(isinstance(value, int) and not isinstance(value, bool) and value >= least, key, value,
            f"must be an integer >= {least}{note}")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _validate_task_mix(mix: DictConfig) -> None:
    for task in ("P", "A"):
        require(task in mix, f"task_mix.{task}", None, "missing: give the share of each task P and A")
        require(_is_number(mix[task]) and mix[task] >= 0, f"task_mix.{task}", mix[task], "must be a number >= 0")
    extra = set(mix) - {"P", "A"}
    require(not extra, "task_mix", sorted(extra), "unknown task(s): expected only P and A")
    total = mix.P + mix.A
    require(abs(total - 1.0) < 1e-6, "task_mix", {"P": mix.P, "A": mix.A}, f"shares sum to {total:g}, must sum to 1")


def _is_device(name) -> bool:
    try:
        torch.device(name)
        return True
    except (RuntimeError, TypeError):
        return False


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return _require_available(name, "device", "cpu or auto")


def _require_available(name: str, key: str, instead: str) -> torch.device:
    device = torch.device(name)
    require(device.type != "cuda" or torch.cuda.is_available(), key, name,
            f"CUDA is not available on this machine (use {key}={instead})")
    return device


def build(node: DictConfig, **kwargs):
    """hydra.utils.instantiate restricted to the project's own targets."""
    return instantiate(node, _execution_whitelist_=PROJECT_TARGETS, **kwargs)
