"""What a resume may change: every checkpoint stores its run's resolved config (config.yaml beside the
weights), and `resume_from` compares it with the new run's. Keys listed in `resume_check.may_change`
(conf/config.yaml: logging, output and time-limit knobs) may differ, and so may `steps` while the LR
schedule does not depend on it; any other difference stops the run with one line naming every
differing key, unless `resume_check.accept_changes=true`, which the run's params record and which
logs the changes it accepted."""
from __future__ import annotations

import copy
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import yaml

from rookworld.specs.optimizer import schedule_uses_steps
from rookworld.specs.rules import ConfigError
from rookworld.specs.run import RunSpec

CONFIG_FILE = "config.yaml"
TRAINER_STATE_FILE = "trainer_state.pt"  # what makes a folder a checkpoint (the loop's state beside the weights)

Changes = dict[str, tuple]  # key -> (the checkpoint's value, the new value)


def save_config(resolved: dict, directory: Path) -> None:
    """`resolved`: a run's config as plain data (RunSpec.resolved)."""
    (Path(directory) / CONFIG_FILE).write_text(yaml.safe_dump(resolved, sort_keys=False))


def check_checkpoint_folder(directory: str | Path) -> None:
    """ConfigError unless `directory` is a folder save_checkpoint wrote: checked before any model loads,
    since no resume_check knob can resume from a folder that is missing or holds no checkpoint."""
    folder = Path(directory)
    if not folder.is_dir():
        raise ConfigError(f"resume_from={str(directory)!r}: no such folder (a checkpoint is a folder "
                          f"checkpoint.dir/step_NNNNNN)")
    if not (folder / TRAINER_STATE_FILE).is_file():
        raise ConfigError(f"resume_from={str(directory)!r}: not a checkpoint folder (it has no {TRAINER_STATE_FILE}; "
                          f"a checkpoint is a folder checkpoint.dir/step_NNNNNN)")


@dataclass(frozen=True)
class ResumePoint:
    """A checkpoint a run continues from, its config checked against the run's."""
    directory: str
    allowed: Changes   # the changes a resume may make
    accepted: Changes  # the other changes, accepted by resume_check.accept_changes


def resume_point(spec: RunSpec) -> ResumePoint | None:
    """The checked checkpoint of spec.resume_from (None: a fresh run); the changes it accepts, said in one line."""
    if not spec.resume_from:
        return None
    check_checkpoint_folder(spec.resume_from)
    allowed, accepted = check_resume(spec, spec.resume_from)
    if accepted:
        print("resume: resume_check.accept_changes=true accepts changes against the checkpoint: "
              + ", ".join(f"{key} ({old!r} -> {new!r})" for key, (old, new) in accepted.items()), flush=True)
    return ResumePoint(str(spec.resume_from), allowed, accepted)


def check_resume(cfg: RunSpec, directory: str | Path) -> tuple[Changes, Changes]:
    """(changes a resume may make, changes accepted by resume_check.accept_changes); ConfigError when
    the checkpoint has no config or other keys differ and the changes are not accepted."""
    path = Path(directory) / CONFIG_FILE
    accept = cfg.resume_check.accept_changes
    if not path.is_file():
        if accept:
            return {}, {CONFIG_FILE: ("missing", "not compared")}
        raise ConfigError(f"resume_from={str(directory)!r}: the checkpoint has no {CONFIG_FILE} to compare this "
                          f"config with; resume_check.accept_changes=true resumes anyway")
    saved = yaml.safe_load(path.read_text())
    changes = differences(saved, cfg.resolved)
    allowed = {key: values for key, values in changes.items() if may_change(key, cfg, saved)}
    refused = {key: values for key, values in changes.items() if key not in allowed}
    if refused and not accept:
        listed = ", ".join(f"{key} ({old!r} -> {new!r})" for key, (old, new) in refused.items())
        raise ConfigError(f"resume_from={str(directory)!r}: the config differs from the checkpoint's in {listed}; "
                          f"a resume may change only resume_check.may_change, and steps while the LR schedule "
                          f"does not use them; resume_check.accept_changes=true resumes anyway")
    return allowed, refused


def resume_base(saved: dict, composed: dict, overrides: Sequence[str], groups: Collection[str]) -> dict | None:
    """What `resume_from=DIR` runs when the command line (`overrides`) chooses no config group: the
    checkpoint's config `saved`, with the keys the command line sets and those a resume may change
    (resume_check.may_change: outputs, logging, time limits) taken from `composed`, this command's config
    as written (interpolations unresolved). So `resume_from=DIR` alone continues that run, and a key set
    on top is checked as always. None when the command line chooses a group other than one a resume may
    change as a whole (tracking=none): `composed` runs then, checked as always."""
    keys = [override.partition("=")[0].lstrip("+~") for override in overrides]
    patterns = composed["resume_check"]["may_change"]
    chosen = [key.partition("@")[0] for key in keys if key.partition("@")[0] in groups]
    if not all(_listed(flatten({group: composed.get(group) or {}}), patterns) for group in chosen):
        return None  # a group whose keys a resume may not all change (tracking=none, say, it may)
    base = copy.deepcopy(saved)
    for key in sorted(flatten(saved).keys() | flatten(composed).keys()):
        if _listed([key], patterns):
            _copy_key(base, composed, key)
    for key in keys:
        _copy_key(base, composed, key)
    return base


def _listed(keys, patterns: Sequence[str]) -> bool:
    """Every one of the dotted `keys` matches one of the shell-style `patterns`."""
    return all(any(fnmatchcase(key, pattern) for pattern in patterns) for key in keys)


def _copy_key(target: dict, source: dict, key: str) -> None:
    """The dotted `key` of `source` (a value or a subtree) set in `target`; removed from it when `source` lacks it."""
    *parents, leaf = key.split(".")
    for name in parents:
        if not isinstance(source, dict) or name not in source:
            source = None
            break
        source = source[name]
        target = target.setdefault(name, {})
    if isinstance(source, dict) and leaf in source:
        target[leaf] = copy.deepcopy(source[leaf])
    else:
        target.pop(leaf, None)


def may_change(key: str, cfg: RunSpec, saved: dict) -> bool:
    if key == "steps":
        return not schedule_uses_steps(cfg.optimizer.min_lr_ratio) and not schedule_uses_steps(
            saved["optimizer"]["min_lr_ratio"])
    return any(fnmatchcase(key, pattern) for pattern in cfg.resume_check.may_change)


def differences(saved: dict, current: dict) -> Changes:
    """Dotted keys whose values differ (a key only one side has counts, with None on the other)."""
    old, new = flatten(saved), flatten(current)
    return {key: (old.get(key), new.get(key)) for key in sorted(old.keys() | new.keys())
            if key not in old or key not in new or old[key] != new[key]}


def flatten(tree: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
