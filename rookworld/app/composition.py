"""Hydra's config composition errors as rookworld's one line: `rookworld: error: key=value: rule`, exit 2.

A typo on the command line (`model=rookworld_tyni`, `optimzer.lr=1e-4`, `sweeps=nosuch`) stops
Hydra before any rookworld code runs, and Hydra reports it in several lines (for an unknown key it
even advises `+optimzer.lr=...`, which would add the typo). `run_hydra_main(main)` runs a
`@hydra.main` function so that such an error reaches rookworld instead, and prints the override as
the user typed it, what is wrong, the close matches and the available options. It does so by
setting HYDRA_FULL_ERROR=1 (Hydra then raises instead of printing and exiting 1), so an error that is
not a composition error (a bug) shows Python's full traceback rather than Hydra's shortened one.
"""
from __future__ import annotations

import difflib
import os
import string
import sys
from collections.abc import Callable, Iterable

from omegaconf import OmegaConf

_FULL_ERROR = "HYDRA_FULL_ERROR"  # Hydra then raises its errors instead of printing them and exiting 1
MIXED_GROUP = "experiment"  # the group whose options belong to different commands: --help lists this command's


def run_hydra_main(main: Callable[[], object], config_name: str) -> None:
    """Call `main` (decorated with @hydra.main on conf/`config_name`) with composition errors in one line."""
    from hydra.errors import ConfigCompositionException, OverrideParseException

    from rookworld.interrupts import Interrupted

    if {"--help", "-h"} & set(sys.argv[1:]):
        print(help_text(config_name))
        return
    os.environ[_FULL_ERROR] = "1"
    try:
        main()
    except (ConfigCompositionException, OverrideParseException) as error:
        print(f"rookworld: error: {describe(error, sys.argv[1:], config_name)}", file=sys.stderr)
        sys.exit(2)
    except Interrupted as stop:  # a multirun of Hydra's own launcher: its job's run is closed (KILLED)
        print(f"rookworld: {stop.stop_reason}", file=sys.stderr)
        sys.exit(stop.exit_code)


def compose_command(overrides: list[str], config_name: str = "config"):
    """rookworld.app.config.compose for a command that is not a @hydra.main (the data, caps and bench tools): a
    typo in an override is a ConfigError saying what run_hydra_main would say (one line and exit 2 under
    rookworld.app.errors.as_command)."""
    from hydra.errors import ConfigCompositionException, OverrideParseException

    from rookworld.app.config import compose
    from rookworld.specs.rules import ConfigError

    try:
        return compose(overrides, config_name)
    except (ConfigCompositionException, OverrideParseException) as error:
        raise ConfigError(describe(error, overrides, config_name)) from None


def help_text(config_name: str) -> str:
    """`--help`: the config's hydra.help.template with $APP_CONFIG_GROUPS as one line per config group, its
    options and its default, and $OWN_KEYS as one line per key under the command's own node (`round.*` for
    conf/round.yaml) with its default. Hydra's own list names each group twice (conf/ and the project root
    that holds sweeps/ are both on its search path) and lists run folders under outputs/ as groups;
    `--hydra-help` still prints Hydra's."""
    from rookworld.tracking import CONF_DIR

    cfg = _compose(config_name, [])
    choices = {k: v for k, v in cfg.hydra.runtime.choices.items() if not k.startswith("hydra/")}
    folders = {str(p.relative_to(CONF_DIR)): p for p in sorted(CONF_DIR.rglob("*")) if p.is_dir()}
    if "sweeps" in choices:  # a command that sweeps takes every group: sweep storage, pruners, ...
        folders["sweeps"] = CONF_DIR.parent / "sweeps"
    listed = {g: p for g, p in folders.items() if g.split("/")[0] != "hydra"
              and ("sweeps" in choices or g.split("/")[0] in choices)}
    width = max(map(len, listed))
    lines = []
    for group, folder in sorted(listed.items()):
        options = sorted(p.stem for p in folder.glob("*.yaml"))
        if group == MIXED_GROUP:
            options = [o for o in options if _adds_no_top_level_key(config_name, cfg, f"{group}={o}")]
        default = choices.get(group)
        lines.append(f"  {group + ':':{width + 1}} " + ", ".join(f"{o} (default)" if o == default else o for o in options))
    return string.Template(cfg.hydra.help.template).safe_substitute(APP_CONFIG_GROUPS="\n".join(lines),
                                                                    OWN_KEYS=_own_keys(cfg, config_name))


def _adds_no_top_level_key(config_name: str, cfg, override: str) -> bool:
    """Whether `override` composes onto the command's config without a top-level key the config lacks: an option
    of another command (an `sft_*` experiment under `rookworld.train`) adds its own (`sft`), which its spec refuses."""
    from hydra.errors import ConfigCompositionException

    try:
        return set(_compose(config_name, [override])) <= set(cfg)
    except ConfigCompositionException:  # it does not compose onto this config: not this command's either
        return False


def _own_keys(cfg, node: str) -> str:
    """`  node.key: default` (as written, interpolations unresolved) for each leaf of the config's node named
    like the command's config; '' when it has none."""
    own = OmegaConf.to_container(cfg, resolve=False).get(node)
    if not isinstance(own, dict):
        return ""
    return "\n".join(f"  {key}: {'null' if value is None else value}" for key, value in _leaves(own, f"{node}."))


def _leaves(node: dict, prefix: str) -> Iterable[tuple[str, object]]:
    for key, child in node.items():
        if isinstance(child, dict):
            yield from _leaves(child, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", child


def describe(error: Exception, argv: list[str], config_name: str) -> str:
    """The one-line `key=value: rule` for a composition error of the command line `argv`."""
    from hydra.errors import MissingConfigException, OverrideParseException

    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    if isinstance(error, MissingConfigException) and error.missing_cfg_file and error.options is not None:
        group, _, option = error.missing_cfg_file.rpartition("/")
        typed = _typed([o for o in overrides if o.partition("=")[2] == option],
                       lambda key: key.lstrip("+~").partition("@")[0] == group, f"{group}={option}")
        return f"{typed}: no option {option!r} in {group}/{_close(option, error.options)}; " \
               f"options: {', '.join(sorted(error.options))}"
    if isinstance(error, OverrideParseException):
        return f"{error.override}: {_cause(error, error.message)}"
    merged = _after(str(error), "Error merging override ")
    if merged is not None:
        return f"{merged}: {_cause(error, str(error))}"
    key = _after(str(error), "Could not override '", "'")
    if key is not None:
        typed = _typed(overrides, lambda k: k.lstrip("+~") == key, key)
        others = [o for o in overrides if o != typed]
        keys = [k for k in config_keys(config_name, others) if k.count(".") == key.count(".")]  # same depth
        return f"{typed}: no key {key!r} in the config{_close(key, keys)}"
    return " ".join(str(error).split())


def _typed(overrides: list[str], matches: Callable[[str], bool], fallback: str) -> str:
    return next((o for o in overrides if matches(o.partition("=")[0])), fallback)


def _after(message: str, prefix: str, end: str = "\n") -> str | None:
    """The text of `message` between `prefix` (its start) and `end`; None if it does not start so."""
    if not message.startswith(prefix):
        return None
    return message[len(prefix):].partition(end)[0].strip()


def _cause(error: Exception, fallback: str) -> str:
    """The reason on one line: the underlying error's first line, else the first line of `fallback` that
    says what is wrong (not Hydra's "Error when parsing ..." header or its documentation link)."""
    if error.__cause__ is not None:
        return str(error.__cause__).strip().splitlines()[0]
    lines = [line for line in fallback.splitlines()
             if line.strip() and not line.startswith(("Error when parsing", "Error parsing override", "See https"))]
    return " ".join((lines or [fallback])[0].split())


def _close(word: str, candidates: Iterable[str]) -> str:
    matches = difflib.get_close_matches(word, list(candidates), n=3, cutoff=0.8)
    return f" (did you mean {' or '.join(matches)}?)" if matches else ""


def config_keys(config_name: str, overrides: list[str]) -> list[str]:
    """Every dotted key of the composed config (with the user's other overrides when they compose)."""
    from hydra.errors import ConfigCompositionException, OverrideParseException

    for attempt in (overrides, []):
        try:
            cfg = _compose(config_name, attempt)
        except (ConfigCompositionException, OverrideParseException):
            continue  # another bad override: the defaults' keys then
        return sorted(_dotted_keys(OmegaConf.to_container(cfg, resolve=False)))
    return []


def _compose(config_name: str, overrides: list[str]):
    """conf/<config_name>.yaml with `overrides` and Hydra's own node, outside a Hydra run."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from rookworld.tracking import CONF_DIR

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR)):
        return compose(config_name, overrides=overrides, return_hydra_config=True)


def _dotted_keys(node: dict, prefix: str = "") -> Iterable[str]:
    for key, child in node.items():
        if key == "_target_":  # which spec an option builds: not a knob to suggest
            continue
        yield f"{prefix}{key}"
        if isinstance(child, dict):
            yield from _dotted_keys(child, f"{prefix}{key}.")
