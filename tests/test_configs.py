"""Every config knob in conf/ and sweeps/ carries a one-line comment (the README promises it)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG_FILES = sorted([*ROOT.glob("conf/**/*.yaml"), *ROOT.glob("sweeps/*.yaml")])
# `key:` at any indent; a key may hold dots or slashes (sweep params: optimizer.lr) or be quoted.
BLOCK_SCALAR = re.compile(r"\s*[|>][-+]?\s*(#|$)")  # `key: |-  # comment`: the lines below, more indented, are text
KEY_LINE = re.compile(r"""^(?P<indent>\s*)(?P<key>'[^']*'|"[^"]*"|[^\s#'"\-][^:#]*?):(\s|$)""")


def trailing_comment(line: str) -> str | None:
    """The text of a `#` comment that follows whitespace outside quotes, or None."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[index + 1:].strip()
    return None


def uncommented_keys(text: str) -> list[tuple[int, str]]:
    """(line number, line) of each key line without a non-empty trailing comment. Blank lines, comment
    lines (`# @package` included), list items (the `defaults:` entries among them) and the top-level
    `defaults:` key are not settings; any other line that is not a `key:` line is reported too, so that
    a YAML form this check cannot read fails instead of passing unchecked."""
    found, block_indent = [], None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if block_indent is not None and (not stripped or len(line) - len(line.lstrip()) > block_indent):
            continue  # a line of a block scalar (`key: |`): the value's text, not a key
        block_indent = None
        if not stripped or stripped == "-" or stripped.startswith(("#", "- ")):
            continue
        match = KEY_LINE.match(line)
        if match and BLOCK_SCALAR.match(line[match.end():]):
            block_indent = len(match["indent"])
        if match and match["key"] == "defaults" and not match["indent"]:
            continue
        if not match or not trailing_comment(line):
            found.append((number, line))
    return found


def test_checker_finds_missing_comments_and_accepts_commented_keys():
    text = "\n".join([
        "# @package _global_",
        "# a header",
        "defaults:",
        "  - fixed",
        "  - override /model: tiny",
        "",
        "grpo:                # the GRPO update",
        "  group_size: 8      # completions per prompt",
        "  lr: 1.0e-5",
        "sampling:",
        "  url: 'a # b'",
        "  dir: x/#y          # '#' not after whitespace is part of the value",
        "params:              # search space",
        "  optimizer.lr: tag(log, interval(1e-6, 1.0))  # learning rate",
        "  kl.coef: interval(0, 1)  #",
        "paths:               # a list",
        "  - data/train-*.parquet",
        "  |block scalar line",
        "help:                # a block scalar",
        "  text: |-           # its lines are text",
        "    a line: not a key",
        "",
        "    another",
        "  after: 1",
        "  bare: |",
        "    text",
    ])
    assert [number for number, _ in uncommented_keys(text)] == [9, 10, 11, 15, 18, 24, 25]


def test_config_files_are_found():
    names = {path.relative_to(ROOT).as_posix() for path in CONFIG_FILES}
    assert {"conf/config.yaml", "conf/kl/fixed.yaml", "conf/engine/stockfish.yaml",
            "conf/hydra/sweeper/rookworld_optuna.yaml", "sweeps/smoke.yaml"} <= names


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_config_key_has_a_comment(path):
    missing = uncommented_keys(path.read_text())
    name = path.relative_to(ROOT).as_posix()
    assert not missing, "keys without a trailing # comment:\n" + "\n".join(
        f"{name}:{number}: {line.strip()}" for number, line in missing)


# `docs/NAME.md, Section` or `docs/NAME.md ("Section")` in a config's comments: the section the reader should open
DOC_SECTION = re.compile(r"""docs/([\w/.-]+\.md)(?:, "?| \(")([A-Z][\w' -]*[\w'])""")


def has_section(document: Path, section: str) -> bool:
    """A heading of the guide, or a paragraph's bold lead (`**Throughput.**`), starts with `section`."""
    text = document.read_text()
    headings = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
    return any(h.startswith(section) for h in headings) or f"**{section}" in text


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_doc_section_a_config_names_exists(path):
    comments = " ".join(trailing_comment(line) or "" for line in path.read_text().splitlines())
    missing = [f"docs/{doc}, {section}" for doc, section in DOC_SECTION.findall(comments)
               if not (ROOT / "docs" / doc).is_file() or not has_section(ROOT / "docs" / doc, section)]
    assert not missing, f"{path.relative_to(ROOT)} names sections no guide has: {'; '.join(missing)}"
