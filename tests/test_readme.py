"""README.md is a first visit's page, and every ```python block of it runs as written.

The page: at most 10 KB, its sections (what rnnfast is, the two set-up commands that .ci/run
runs, one first model, the performance headline, the features table, whose links name files);
the rest of what a user reads is in docs/ (tests/test_docs.py runs its blocks).

Each block runs on its own, in a fresh interpreter, with what ``CHECKS`` adds for it; what it
needs beyond rnnfast (optional packages, MPI, a data set) is in tests/code_blocks.py.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from code_blocks import run_block

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^([ \t]*)```(\w*)[ \t]*$")


def _slug(title):
    """A section's id: its title in lower case, runs of other characters as one dash."""
    return re.sub(r"\W+", "-", title.lower()).strip("-")


def python_blocks():
    """(id, code) of every python block: its id the title of the section it is in and its
    number there; the code dedented (a block may sit in a list item)."""
    blocks, counts, title = [], {}, "top"
    fence = body = None  # (indent, language) of the open block and its lines
    for line in README.read_text(encoding="utf-8").splitlines():
        match = FENCE.match(line)
        if fence is None and match:
            fence, body = (match.group(1), match.group(2)), []
        elif fence is not None and match and match.group(1) == fence[0] and not match.group(2):
            if fence[1] == "python":
                counts[title] = counts.get(title, 0) + 1
                code = textwrap.dedent("\n".join(body))
                blocks.append((f"{_slug(title)}-{counts[title]}", code))
            fence = None
        elif fence is not None:
            body.append(line)
        elif line.startswith("#"):
            title = line.lstrip("#").strip()
    assert fence is None, "README.md: a code block is not closed"
    return blocks


BLOCKS = python_blocks()

# What some blocks must also have computed: run after the block, in its interpreter. (The
# checks of the sections that moved to docs/ are in tests/test_docs.py, with their pages.)
CHECKS = {
    "a-first-model-1": """
assert y.shape == (50, 4, 64) and h_n.shape == (4, 4, 32) and dx.shape == x.shape
assert len(history["val_loss"]) == 3 and np.isfinite(history["val_loss"]).all()
assert history["val_loss"][-1] < history["val_loss"][0]
assert np.abs(model[1](out) - model(x_all[800:801])).max() < 1e-5
""",
}

# A first visit's README: what rnnfast is, the two set-up commands, one first model, the
# performance headline and the features table; everything else is in docs/.
SECTIONS = ["set-up", "a-first-model", "keras-code", "performance", "features"]
MAX_BYTES = 10_000
COMMANDS = ("pip install . && python -m rnnfast demo", 'pip install ".[test]" && python -m pytest')


def test_the_readme_fits_a_first_visit():
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size} bytes, over {MAX_BYTES}: move text to docs/"
    lines = README.read_text(encoding="utf-8").splitlines()
    sections = [_slug(line[3:]) for line in lines if line.startswith("## ")]
    assert sections == SECTIONS, sections
    assert [i for i, _ in BLOCKS] == ["a-first-model-1", "keras-code-1"], [i for i, _ in BLOCKS]


def test_the_set_up_commands_are_those_ci_runs():
    """Each set-up command is a bash block of its own; .ci/run runs the test command verbatim."""
    text = README.read_text(encoding="utf-8")
    for command in COMMANDS:
        assert f"```bash\n{command}\n```" in text, command
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert COMMANDS[1] in ci, "the README's test command is not a line of .ci/run"


def test_the_readme_links_resolve():
    """Every relative link of the README (its features table's docs pages) names a file."""
    prose = re.sub(r"```.*?```|`[^`]*`", "", README.read_text(encoding="utf-8"), flags=re.S)
    links = re.findall(r"\]\(([^)#:]+)\)", prose)
    assert len(links) >= 10, links
    missing = [link for link in links if not (README.parent / link).is_file()]
    assert not missing, missing


def test_every_check_has_its_block():
    assert set(CHECKS) <= {i for i, _ in BLOCKS}


@pytest.mark.parametrize("block, code", BLOCKS, ids=[i for i, _ in BLOCKS])
def test_block_runs_on_its_own(block, code, tmp_path):
    run_block(code, tmp_path, CHECKS.get(block, ""))
