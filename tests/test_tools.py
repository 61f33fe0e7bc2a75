"""tools/ holds what a user runs, tools/lab/ the scripts of one study each: every script opens with a header
that says what it does and gives an example command naming it, and docs/layout.md lists every script a
user runs."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / "tools"
HEADER_LINES = 25  # the example command stands within the script's first lines
SCRIPTS = sorted(p for p in TOOLS.rglob("*") if p.is_file() and p.suffix in {".sh", ".py", ".sbatch"})


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_script_has_a_header_with_an_example(script):
    head = script.read_text().splitlines()[:HEADER_LINES]
    assert any(script.name in line for line in head), (
        f"{script.relative_to(REPO)}: its first {HEADER_LINES} lines give no example command naming it")


def test_layout_lists_every_script_a_user_runs():
    layout = (REPO / "docs" / "layout.md").read_text()
    user_scripts = [p.name for p in SCRIPTS if p.parent == TOOLS]
    missing = [name for name in user_scripts if f"`{name}`" not in layout]
    assert not missing, f"docs/layout.md's tools/ table does not list {', '.join(missing)}"


def test_every_lab_script_is_named_where_its_figures_are():
    """A script of tools/lab/ made one study's figures: the record, guide or config that states them names it."""
    texts = [p.read_text() for p in [*(REPO / "docs").rglob("*.md"), *(REPO / "conf").rglob("*.yaml"),
                                     *(REPO / "rookworld").rglob("README.md")]]
    lab = [p for p in SCRIPTS if TOOLS / "lab" in p.parents]
    unnamed = [str(p.relative_to(REPO)) for p in lab if not any(str(p.relative_to(REPO)) in t for t in texts)]
    assert not unnamed, f"no record, guide or config names {', '.join(unnamed)}: name it beside its figures, or remove it"
