"""docs/architecture.rst stays true: every folder its two layouts name (``python/rnnfast/`` and
``cpp/``) exists, every folder of those trees is named, and its layer order is the one
``tests/test_architecture.py`` enforces on the imports."""

from __future__ import annotations

import re
from pathlib import Path

from test_architecture import LAYER_ORDER

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "architecture.rst").read_text(encoding="utf-8")
TREES = ("python/rnnfast", "cpp")


def _text_blocks(page):
    """The bodies of the page's ``.. code-block:: text`` directives, as lists of lines."""
    blocks, lines, i = [], page.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() == ".. code-block:: text":
            i += 1
            body = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("   ")):
                body.append(lines[i][3:])
                i += 1
            blocks.append(body)
        else:
            i += 1
    return blocks


def named_folders(page):
    """The folders the layouts name: a line's first word ending in "/", nested by its indent
    (two spaces a level) under the block's unindented root."""
    folders = set()
    for block in _text_blocks(page):
        stack = []
        for line in block:
            match = re.match(r"( *)(\S+/)(\s|$)", line)
            if not match:
                continue
            depth = len(match.group(1)) // 2
            stack = stack[:depth] + [match.group(2).rstrip("/")]
            folders.add("/".join(stack))
    return folders


def tree_folders():
    found = set()
    for tree in TREES:
        base = ROOT / tree
        found.add(tree)
        for path in base.rglob("*"):
            rel = path.relative_to(ROOT)
            if path.is_dir() and not any(p.startswith((".", "__")) for p in rel.parts):
                found.add(rel.as_posix())
    return found


def page_layer_order(page):
    order = {}
    for block in _text_blocks(page):
        for line in block:
            match = re.match(r"(\d)  (.+)$", line)
            if match:
                order[int(match.group(1))] = tuple(n.strip() for n in match.group(2).split(","))
    return order


def test_every_named_folder_exists_and_every_folder_is_named():
    named, present = named_folders(PAGE), tree_folders()
    assert not named - present, f"named on the page but not in the tree: {sorted(named - present)}"
    assert not present - named, f"in the tree but not on the page: {sorted(present - named)}"


def test_the_layer_order_is_the_enforced_one():
    enforced = {level: tuple(n for n in names if n) for level, names in LAYER_ORDER.items()}
    assert page_layer_order(PAGE) == enforced


def test_the_folder_reader_nests_by_indent():
    page = ".. code-block:: text\n\n   cpp/\n     a/   x\n       b/\n     c/\n"
    assert named_folders(page) == {"cpp", "cpp/a", "cpp/a/b", "cpp/c"}
