"""The README is read in five minutes and is complete where it promises to be: its config table names
every config group of conf/ (and sweeps/), every option of each, every top-level key; every relative link
of the README and of docs/*.md leads to a file, and an anchor to a heading, that exists."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
CONF = REPO / "conf"
MAX_BYTES = 15_000  # about five minutes of reading
NOT_CONFIG_KEYS = {"defaults", "hydra"}  # Hydra's own nodes of conf/config.yaml
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def config_table() -> dict[str, str]:
    """The README's config table: the group of each row (its first cell, without backticks) -> the rest."""
    text = README.read_text()
    section = text.split("\n## Config groups\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|", 1) for line in section.splitlines() if line.startswith("| ")]
    return {group.strip().strip("`"): rest for group, rest in rows[1:]}


def groups() -> dict[str, list[str]]:
    """Every config group a command line can choose (folders of conf/ but Hydra's own, and sweeps/), with
    its options."""
    folders = {str(p.relative_to(CONF)): p for p in CONF.rglob("*") if p.is_dir() and p.relative_to(CONF).parts[0] != "hydra"}
    folders["sweeps"] = REPO / "sweeps"
    return {group: sorted(p.stem for p in folder.glob("*.yaml")) for group, folder in sorted(folders.items())}


def test_the_readme_is_short_enough_to_read_in_five_minutes():
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size} bytes; move detail into docs/ (at most {MAX_BYTES})"


@pytest.mark.parametrize("group, options", groups().items())
def test_every_config_group_and_option_is_in_the_readme_table(group, options):
    table = config_table()
    assert group in table, f"README's config table has no row for the group `{group}` (options: {', '.join(options)})"
    missing = [o for o in options if f"`{o}`" not in table[group]]
    assert not missing, f"README's config table, row `{group}`, lacks the option(s) {', '.join(missing)}"


def test_every_top_level_key_is_in_the_readme_table():
    keys = set(yaml.safe_load((CONF / "config.yaml").read_text())) - NOT_CONFIG_KEYS
    row = config_table()["top level"]
    missing = sorted(k for k in keys if not re.search(rf"`{re.escape(k)}[`.]", row))  # `seed`, `checkpoint.*`
    assert not missing, f"README's config table, row `top level`, lacks {', '.join(missing)}"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen = set(), {}
    for line in FENCE.sub("", path.read_text()).splitlines():
        if line.startswith("#"):
            base = slug(line.lstrip("#"))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


MARKDOWN = [README, *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("document", MARKDOWN, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(document):
    broken = []
    for target in LINK.findall(FENCE.sub("", document.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        path = (document.parent / file).resolve() if file else document
        if not path.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target} (no heading with that anchor)")
    assert not broken, f"{document.relative_to(REPO)}: " + "; ".join(broken)
