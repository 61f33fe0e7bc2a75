"""The README is read in five minutes and is complete where it promises to be: its config table names
every config group of conf/ (and sweeps/), every option of each, every top-level key; every relative link
of the README, of the guides (docs/*.md) and of the lab notebook (docs/lab/*.md) leads to a file, and an
anchor to a heading, that exists. The README links every guide; a guide is read without the lab notebook
(it links a lab record only as the evidence for a figure); the guides keep to their sizes; every lab
record is listed in the notebook's index with its date."""
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


GUIDES = sorted((REPO / "docs").glob("*.md"))
LAB = REPO / "docs" / "lab"
LAB_RECORDS = sorted(p for p in LAB.glob("*.md") if p.name != "README.md")
MARKDOWN = [README, *GUIDES, *sorted(LAB.glob("*.md"))]
GUIDE_BUDGET = {"all guides": 160_000, "sweeps.md": 25_000, "performance.md": 15_000}  # bytes
EVIDENCE_WINDOW = 80  # characters before a link to the lab where the word "evidence" must stand
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


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


def relative_links(document: Path) -> list[tuple[str, str]]:
    """(the text before the link, lines joined, the target) of every relative link outside code fences."""
    text = " ".join(FENCE.sub("", document.read_text()).split())
    return [(text[: match.start()], match.group(1)) for match in LINK.finditer(text)
            if not re.match(r"[a-z]+:", match.group(1))]


def test_the_readme_links_every_guide():
    linked = {(README.parent / target.partition("#")[0]).resolve() for _, target in relative_links(README)}
    missing = [g.name for g in GUIDES if g.resolve() not in linked]
    assert not missing, f"README.md links no docs/{', docs/'.join(missing)}: a guide is one click from the README"


@pytest.mark.parametrize("document", [README, *GUIDES], ids=lambda p: str(p.relative_to(REPO)))
def test_a_guide_links_the_lab_notebook_only_as_evidence(document):
    bare = [target for before, target in relative_links(document)
            if (document.parent / target.partition("#")[0]).resolve().is_relative_to(LAB)
            and "evidence" not in before[-EVIDENCE_WINDOW:].lower()]
    assert not bare, (f"{document.relative_to(REPO)} links the lab notebook ({', '.join(bare)}) other than as the "
                      f"evidence for a figure: say 'evidence:' before the link, or move what the reader needs into the guide")


def test_the_guides_keep_to_their_sizes():
    sizes = {"all guides": sum(len(g.read_bytes()) for g in GUIDES),
             **{name: len((REPO / "docs" / name).read_bytes()) for name in GUIDE_BUDGET if name.endswith(".md")}}
    over = [f"{name} {sizes[name]:,} B (at most {limit:,})" for name, limit in GUIDE_BUDGET.items() if sizes[name] > limit]
    assert not over, "guides over their size: " + "; ".join(over) + ": move the history into docs/lab/"


def test_every_lab_record_is_in_the_index_with_its_date():
    index = (LAB / "README.md").read_text()
    unlisted = [r.name for r in LAB_RECORDS if f"]({r.name})" not in index]
    undated = [r.name for r in LAB_RECORDS if not DATE.search("\n".join(r.read_text().splitlines()[:5]))]
    assert not unlisted, f"docs/lab/README.md does not list {', '.join(unlisted)}"
    assert not undated, f"lab records without their date (YYYY-MM-DD) in their first lines: {', '.join(undated)}"


def test_the_module_map_names_every_module():
    """docs/architecture.md is the one module map: every module of rookworld/ has its line there."""
    text = (REPO / "docs" / "architecture.md").read_text()
    modules = sorted(p for p in (REPO / "rookworld").rglob("*.py") if p.name != "__init__.py")
    missing = [str(p.relative_to(REPO)) for p in modules if p.name not in text]
    assert not missing, f"docs/architecture.md's module map lacks {', '.join(missing)}: give each a line"
