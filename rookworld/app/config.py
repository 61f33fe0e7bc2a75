"""The loader: the composed config (a DictConfig) becomes the typed, frozen specs of rookworld/specs/, so
every bad value fails before any model loads, in one line. The one library module that reads a DictConfig;
what it builds (RunSpec, SftSpec, BenchSpec) is what the trainer, the data, the model and the reward get."""
from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import yaml

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from rookworld.run.resume import CONFIG_FILE, resume_base
from rookworld.specs.bench import Bench, BenchSpec
from rookworld.specs.play import PlaySpec
from rookworld.specs.round import Round, RoundSpec
from rookworld.specs.rules import ConfigError, require
from rookworld.specs.run import RunSpec
from rookworld.specs.sft import SftSpec
from rookworld.specs.sweep import STAGES, Stages, Sweeper
from rookworld.specs.trial import REPORT_KEYS, TrialReport

PROJECT_TARGETS = "rookworld.*"
ASSETS_DIR = Path(__file__).parents[1] / "assets"
DATA_DIR = Path(__file__).parents[1] / "data"
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"

# `${rookworld.asset:NAME}` in a config: a file or folder shipped in rookworld/assets/.
def _asset(name: str) -> str:
    return str(ASSETS_DIR / name)


OmegaConf.register_resolver("rookworld.asset", _asset, replace=True)


# `${rookworld.data:NAME}` in a config: a data file shipped in rookworld/data/ (e.g. selfplay/test.jsonl.xz).
def _data_file(name: str) -> str:
    return str(DATA_DIR / name)


OmegaConf.register_resolver("rookworld.data", _data_file, replace=True)


def compose(overrides: list[str], config_name: str = "config") -> DictConfig:
    """conf/<config_name>.yaml with `overrides`, as the entry points compose it (sweeps=NAME too)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR)):
        return hydra_compose(config_name, overrides=overrides, return_hydra_config=True)


def value_sources(loader, overrides: Sequence[str], config_name: str = "config") -> dict[str, str]:
    """Each run key that a source other than its own group's options sets, and that source (`experiment=NAME`,
    `sweeps=NAME`, `group_shape=NAME`, the command line): the last to set it, in Hydra's merge order. `loader`:
    Hydra's config loader (GlobalHydra's, or a sweep's HydraContext's)."""
    from hydra.types import RunMode

    defaults = loader.compute_defaults_list(config_name, list(overrides), RunMode.RUN)
    sources: dict[str, str] = {}
    for element in defaults.defaults:
        if element.config_path is None or element.package.startswith("hydra"):
            continue
        group, _, option = element.config_path.rpartition("/")
        loaded = loader.repository.load_config(element.config_path)
        tree = OmegaConf.to_container(loaded.config, resolve=False) if loaded is not None else {}
        tree.pop("defaults", None)
        for key in _leaf_keys(tree, element.package):
            if key.startswith("hydra.") or element.primary or key.partition(".")[0] == group.partition("/")[0]:
                sources.pop(key, None)  # the primary config's own keys, or the key's own group's option: a default
            else:
                sources[key] = f"{group.replace('/', '.')}={option}"
    for override in defaults.config_overrides:
        if not override.is_delete():  # ~key removes a key: nothing is set
            sources[override.key_or_group] = "the command line"
    return sources


def _leaf_keys(tree: dict, prefix: str) -> list[str]:
    keys = []
    for name, value in tree.items():
        key = f"{prefix}.{name}" if prefix else str(name)
        keys += _leaf_keys(value, key) if isinstance(value, dict) and value else [key]
    return keys


def load_run(cfg: DictConfig) -> RunSpec:
    """The RunSpec of a composed conf/config.yaml (ConfigError on the first bad value)."""
    return spec_of(RunSpec, _plain(cfg))


def resumed_config(cfg: DictConfig, overrides: Sequence[str], groups: Collection[str]) -> DictConfig:
    """The config of a run given `resume_from=DIR`: the checkpoint's own config with the command line's
    `overrides` on top when they choose none of the config `groups` (rookworld.run.resume.resume_base),
    so that `resume_from=DIR` alone continues that run; `cfg` itself otherwise, or without DIR/config.yaml
    (the resume check then says what is missing)."""
    path = Path(str(cfg.get("resume_from") or "")) / CONFIG_FILE
    if not cfg.get("resume_from") or not path.is_file():
        return cfg
    composed = OmegaConf.to_container(cfg, resolve=False)
    composed.pop("hydra", None)
    base = resume_base(yaml.safe_load(path.read_text()), composed, overrides, groups)
    return cfg if base is None else OmegaConf.create(base)


def load_sft(cfg: DictConfig) -> SftSpec:
    """The SftSpec of a composed conf/sft.yaml."""
    return spec_of(SftSpec, _plain(cfg))


def load_play(cfg: DictConfig) -> PlaySpec:
    """The PlaySpec of a composed conf/play.yaml."""
    return spec_of(PlaySpec, _plain(cfg))


def load_bench(cfg: DictConfig) -> BenchSpec:
    """The BenchSpec of a composed conf/bench.yaml: the training run and the `bench` knobs."""
    plain = _plain(cfg)
    bench = spec_of(Bench, plain.pop("bench"), "bench")
    return BenchSpec(run=spec_of(RunSpec, plain), bench=bench)


def load_round(cfg: DictConfig) -> RoundSpec:
    """The RoundSpec of a composed conf/round.yaml: the supervised loop's spec and the `round` knobs."""
    plain = _plain(cfg)
    round_knobs = spec_of(Round, plain.pop("round"), "round")
    return RoundSpec(sft=spec_of(SftSpec, plain), round=round_knobs)


def load_sweeper(arguments: dict) -> Sweeper:
    """The Sweeper spec of the sweeper's constructor arguments (`hydra.sweeper.*`, nodes resolved)."""
    return spec_of(Sweeper, {key: _resolved_node(value) for key, value in arguments.items()}, "hydra.sweeper")


def load_stages(node) -> Stages | None:
    """The Stages spec of `hydra.sweeper.stages` (a node or plain data); None when staging is off."""
    stages = spec_of(Stages, _resolved_node(node), STAGES.rstrip("."))
    return stages if stages.enabled else None


def load_trial_report(trial: DictConfig) -> TrialReport:
    """The TrialReport of a run's `trial` node (the keys its pruning hook reads)."""
    return spec_of(TrialReport, {key: OmegaConf.select(trial, key) for key in REPORT_KEYS}, "trial")


def _resolved_node(value):
    """A config node as plain data, its interpolations resolved (one-line ConfigError when one does not)."""
    if not OmegaConf.is_config(value):
        return value
    try:
        return OmegaConf.to_container(value, resolve=True)
    except Exception as error:  # an interpolation that does not resolve
        raise ConfigError(f"hydra.sweeper: {error}".splitlines()[0]) from error


# The names the sweeper's `validate` and older callers use.
validate, validate_sft, validate_bench = load_run, load_sft, load_bench


def _plain(cfg: DictConfig) -> dict:
    """The resolved config as plain data, without Hydra's own node."""
    raw = OmegaConf.to_container(cfg, resolve=False)
    raw.pop("hydra", None)
    return _resolved(cfg, raw, "")


def _resolved(cfg: DictConfig, raw, key: str):
    """`raw` (the value at `key` as written) with its interpolations resolved. Outside a Hydra run's own
    job (tests, a sweep's probe configs) a `${hydra:...}` value has nothing to resolve against yet and
    stays as written."""
    if isinstance(raw, dict):
        return {name: _resolved(cfg, value, f"{key}.{name}" if key else name) for name, value in raw.items()}
    if isinstance(raw, list):
        return [_resolved(cfg, value, f"{key}[{index}]") for index, value in enumerate(raw)]
    if not (isinstance(raw, str) and "${" in raw):
        return raw
    try:
        value = OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
    except InterpolationResolutionError:
        if "${hydra:" not in raw:
            raise
        return raw
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def spec_of(kind: type, node: dict, key: str = ""):
    """The spec `node` describes: its `_target_` class (which must be one of `kind`), else `kind` itself;
    nested specs built the same way from the field types; each value checked against its field's type.
    The top-level specs also get the whole node as `resolved`."""
    if "_target_" in node:
        kind = _target_class(node, kind, key)
    require(dataclasses.is_dataclass(kind), f"{key}._target_", None, "missing: the option names its spec")
    hints = typing.get_type_hints(kind)
    names = [f.name for f in dataclasses.fields(kind)]
    unknown = sorted(set(node) - set(names) - {"_target_"})
    require(not unknown, key or "config", unknown, f"unknown key(s) for {kind.__name__}: expected {', '.join(names)}")
    values = {}
    for name in names:
        path = f"{key}.{name}" if key else name
        if name == "resolved":
            values[name] = node
            continue
        require(name in node, path, None, "missing: give it a value")
        if node[name] == "???":  # OmegaConf's mandatory value, left unset
            raise ConfigError(f"{path} is required (no default): give {path}=VALUE")
        values[name] = _value(hints[name], node[name], path)
    return kind(**values)


def _target_class(node: dict, kind, key: str) -> type:
    """The spec a node's `_target_` names: one of the specs its field allows (nothing else is imported)."""
    options = typing.get_args(kind) or (kind,)
    by_name = {f"{option.__module__}.{option.__name__}": option for option in options}
    require(node["_target_"] in by_name, f"{key}._target_", node["_target_"], f"expected one of {', '.join(by_name)}")
    return by_name[node["_target_"]]


def _value(hint, value, path: str):
    """`value` checked against the field type `hint` (a spec, a union of specs, a scalar, a list, a dict)."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    specs = [o for o in options if dataclasses.is_dataclass(o)]
    if specs and isinstance(value, dict):
        return spec_of(hint if len(specs) > 1 else specs[0], value, path)
    if value is None and type(None) in options:
        return None
    for option in options:
        origin = typing.get_origin(option) or option
        if origin is Any:
            return value
        if origin is tuple and isinstance(value, list):
            return tuple(value)
        if origin is dict and isinstance(value, dict):
            return value
        if _is_instance(value, origin):
            return value
    raise ConfigError(f"{path}={value!r}: expected {_describe(options)}")


def _is_instance(value, kind) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(kind, type) and isinstance(value, kind)


_TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", dict: "a mapping",
               tuple: "a list", type(None): "null"}


def _describe(options: tuple) -> str:
    names = [_TYPE_NAMES.get(typing.get_origin(o) or o, getattr(o, "__name__", str(o))) for o in options]
    return " or ".join(dict.fromkeys(names))


def build(node, **kwargs):
    """hydra.utils.instantiate restricted to the project's own targets."""
    return instantiate(node, _execution_whitelist_=PROJECT_TARGETS, **kwargs)
