"""The typed specs (rookworld/specs/) and their loader (rookworld/app/config.py): every option of every group
builds its spec, a key belongs only to the option that uses it, and a bad value, type, key or option fails
in one line `key=value: rule`."""
from __future__ import annotations

import dataclasses
import re
import types
import typing
from pathlib import Path

import pytest

from rookworld.app.config import compose, load_run
from rookworld.specs.rules import ConfigError
from rookworld.specs.kl import KLAdaptive, KLFixed, KLNone
from rookworld.specs.optimizer import AdamW
from rookworld.specs.run import RunSpec

CONF = Path(__file__).resolve().parents[1] / "conf"
OPTION_GROUPS = ("kl", "model", "optimizer", "data", "reward", "tracking")


def options() -> list[tuple[str, str]]:
    return [(group, path.stem) for group in OPTION_GROUPS for path in sorted((CONF / group).glob("*.yaml"))]


@pytest.mark.parametrize("group, option", options())
def test_every_option_builds_the_spec_its_target_names(group, option):
    spec = load_run(compose([f"{group}={option}", "device=cpu"]))
    built = getattr(spec, group)
    target = spec.resolved[group]["_target_"]  # its own, or its defaults' (move_value_sharp: move_value's)
    assert f"{type(built).__module__}.{type(built).__name__}" == target
    fields = {f.name for f in dataclasses.fields(built)}
    composed = set(spec.resolved[group]) - {"_target_"}
    assert composed == fields  # every key of the option is a field of its spec, and the other way round


def test_no_config_key_is_marked_unused():
    marked = [f"{path.relative_to(CONF)}:{number}" for path in sorted(CONF.rglob("*.yaml"))
              for number, line in enumerate(path.read_text().splitlines(), 1) if "unused" in line]
    assert not marked, marked


def test_kl_options_are_told_apart_by_type():
    kinds = {option: type(load_run(compose([f"kl={option}", "device=cpu"])).kl) for option in ("none", "fixed", "adaptive")}
    assert kinds == {"none": KLNone, "fixed": KLFixed, "adaptive": KLAdaptive}
    assert [f.name for f in dataclasses.fields(KLNone)] == ["kind"]  # no reference, no coefficient, no guard


def test_a_spec_is_frozen():
    spec = load_run(compose(["device=cpu"]))
    assert isinstance(spec.optimizer, AdamW)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.optimizer.lr = 1.0


@pytest.mark.parametrize("overrides, line", [
    (["steps=abc"], "steps='abc': expected an integer"),
    (["grpo.cuda_graphs=maybe"], "grpo.cuda_graphs='maybe': expected true or false"),
    (["optimizer.lr=fast"], "optimizer.lr='fast': expected a number"),
    (["kl.kind=adaptive"], "kl.kind='adaptive': the kl option is fixed; choose another with kl=adaptive"),
    (["optimizer.name=sgd"], "optimizer.name='sgd': the optimizer option is adamw; choose another with optimizer=sgd"),
    (["+kl.foo=1"], "kl=['foo']: unknown key(s) for KLFixed: expected kind, coef, "),
    (["kl._target_=rookworld.specs.optimizer.AdamW"], "kl._target_='rookworld.specs.optimizer.AdamW': expected one of "),
    (["kl._target_=rookworld.specs.kl.Nothing"], "kl._target_='rookworld.specs.kl.Nothing': expected one of rookworld.specs.kl.KLNone, "),
    (["grpo.entropy.min=2"], "grpo.entropy.min=2: must be <= grpo.entropy.max=1.0"),
    (["grpo.top_entropy_quantile=0"], "grpo.top_entropy_quantile=0: must be in (0, 1]"),
    (["grpo.reward_aggregation=normalize_then_sum", "reward=exact"],
     "grpo.reward_aggregation='normalize_then_sum': needs reward=graduated"),
    (["grpo.num_minibatches=100"], "grpo.num_minibatches=100: must be between 1 and prompts_per_step * group_size = 64"),
    (["kl=adaptive", "kl.horizon=0"], "kl.horizon=0: adaptive KL needs a horizon > 0"),
    (["resume_check.may_change=[]", "resume_check.accept_changes=yes"], "resume_check.accept_changes='yes': expected true"),
    (["guards.grad_norm.steps_above=0"], "guards.grad_norm.steps_above=0: must be an integer >= 1"),
    (["model=tiny", "model.dtype=float16"], "model.dtype='float16': expected one of auto, float32, bfloat16"),
])
def test_a_bad_value_fails_in_one_line_naming_it(overrides, line):
    with pytest.raises(ConfigError) as error:
        load_run(compose([*overrides, "device=cpu"]))
    message = str(error.value)
    assert message.startswith(line) and "\n" not in message, message


def test_the_resolved_config_is_what_a_checkpoint_stores():
    spec = load_run(compose(["kl=adaptive", "device=cpu", "checkpoint.dir=/tmp/x"]))
    assert spec.resolved["kl"]["target"] == spec.kl.target and spec.resolved["checkpoint"]["dir"] == "/tmp/x"
    assert "hydra" not in spec.resolved
    assert re.fullmatch(r"\$\{hydra:.*\}/checkpoints", load_run(compose(["device=cpu"])).checkpoint.dir)


REFUSED = {  # one refused value of every spec a RunSpec holds: the start of its one-line message
    "RunSpec": (["steps=-1"], "steps=-1: must be >= 0"),
    "Checkpoint": (["checkpoint.every=-1"], "checkpoint.every=-1: must be >= 0"),
    "ResumeCheck": (["resume_check.accept_changes=yes"], "resume_check.accept_changes='yes': expected true or false"),
    "Objective": (["objective.metric=score"], "objective.metric='score': must name an evaluation metric"),
    "HubModel": (["model.dtype=float16"], "model.dtype='float16': expected one of"),
    "FolderModel": (["model=rookworld_tiny", "model.dtype=half"], "model.dtype='half': expected one of"),
    "RandomModel": (["model=tiny", "model.dtype=half"], "model.dtype='half': expected one of"),
    "TinyShape": (["model=tiny", "model.tiny.n_embd=65"], "model.tiny.n_embd=65: must be a multiple of model.tiny.n_head=2"),
    "GRPO": (["grpo.group_size=1"], "grpo.group_size=1: must be an integer >= 2"),
    "Entropy": (["grpo.entropy.coef=-1"], "grpo.entropy.coef=-1: must be a number >= 0"),
    "DynamicSampling": (["grpo.dynamic_sampling.max_rounds=0"], "grpo.dynamic_sampling.max_rounds=0: must be an integer"),
    "SamplerCorrection": (["grpo.sampler_correction.cap=0.5"], "grpo.sampler_correction.cap=0.5: must be a number >= 1"),
    "RewardNorm": (["grpo.reward_norm.momentum=1"], "grpo.reward_norm.momentum=1: must be in [0, 1)"),
    "Sampling": (["sampling.top_p=0"], "sampling.top_p=0: must be in (0, 1]"),
    "Graduated": (["reward.policy_best_move=0.5"], "reward.policy_*: the policy weights sum to 1.1, expected 1.0"),
    "Exact": (["reward=exact", "reward.malformed_penalty=0.5"], "reward.malformed_penalty=0.5: must be in [-1, 0]"),
    "MoveValue": (["reward=move_value", "reward.loss_scale=0"], "reward.loss_scale=0: must be a number > 0"),
    "KLNone": (["kl=none", "kl.kind=fixed"], "kl.kind='fixed': the kl option is none"),
    "KLFixed": (["kl.coef=-1"], "kl.coef=-1: must be >= 0"),
    "KLAdaptive": (["kl=adaptive", "kl.horizon=0"], "kl.horizon=0: adaptive KL needs a horizon > 0"),
    "AdamW": (["optimizer.lr=-1"], "optimizer.lr=-1: must be a positive finite number"),
    "SGD": (["optimizer=sgd", "optimizer.momentum=-0.1"], "optimizer.momentum=-0.1: must be in [0, 1)"),
    "TaskMix": (["task_mix.P=0.5"], "task_mix="),
    "BundledData": (["data.arbiter_pool_size=0"], "data.arbiter_pool_size=0: must be >= 1"),
    "RookWorld7MData": (["data=rookworld7m", "data.heldout=nope"], "data.heldout='nope': expected one of"),
    "Difficulty": (["difficulty.low=2"], "difficulty.low=2: must be in [0, 1]"),
    "Eval": (["eval.batch_size=0"], "eval.batch_size=0: must be >= 1"),
    "Guards": (["guards.max_nonfinite_steps=0"], "guards.max_nonfinite_steps=0: must be an integer >= 1"),
    "KLGrowth": (["guards.kl_growth.factor=1"], "guards.kl_growth.factor=1: must be a number > 1"),
    "EntropyCollapse": (["guards.entropy.min_ratio=1.5"], "guards.entropy.min_ratio=1.5: must be in (0, 1)"),
    "GradNormSpike": (["guards.grad_norm.steps_above=0"], "guards.grad_norm.steps_above=0: must be an integer >= 1"),
    "RewardDrop": (["guards.reward.drop=0"], "guards.reward.drop=0: must be a number > 0"),
    "NoTracking": (["tracking=none", "tracking.backend=mlflow"], "tracking.backend='mlflow': the tracking option is none"),
    "MLflowTracking": (["tracking=mlflow", "tracking.log_checkpoint=maybe"], "tracking.log_checkpoint='maybe': expected true or false"),
}


def run_spec_classes() -> set[str]:
    """The names of every spec class a RunSpec holds, its own included (through the options' unions)."""
    seen: set[str] = set()

    def walk(kind) -> None:
        if typing.get_origin(kind) in (typing.Union, types.UnionType):
            for member in typing.get_args(kind):
                walk(member)
        elif dataclasses.is_dataclass(kind) and kind.__name__ not in seen:
            seen.add(kind.__name__)
            hints = typing.get_type_hints(kind)
            for spec_field in dataclasses.fields(kind):
                walk(hints[spec_field.name])

    walk(RunSpec)
    return seen


def test_every_spec_has_a_refused_value():
    assert run_spec_classes() == set(REFUSED)


@pytest.mark.parametrize("spec", sorted(REFUSED))
def test_each_spec_refuses_a_bad_value_in_one_line_before_any_model_loads(spec):
    """load_run builds the specs only (no model, no data read beyond the files' existence): the value is
    refused there, in one line naming it."""
    overrides, line = REFUSED[spec]
    with pytest.raises(ConfigError) as error:
        load_run(compose([*overrides, "device=cpu"]))
    message = str(error.value)
    assert message.startswith(line) and "\n" not in message, message
