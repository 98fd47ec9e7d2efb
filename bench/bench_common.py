"""What the measuring scripts that take ``--cases "T,B,D,H;..."`` share: reading the cases,
the text table of their rows, and the JSON they leave (bench/harness.py does the timing)."""

from __future__ import annotations

import json
from pathlib import Path


def parse_cases(text):
    """``"T,B,D,H;..."`` as a list of (T, B, D, H) tuples of positive ints; anything else ends
    the script with a message naming the part that is not one."""
    cases = []
    for part in text.split(";"):
        try:
            values = tuple(int(v) for v in part.split(","))
        except ValueError:
            values = ()
        if len(values) != 4 or min(values) < 1:
            raise SystemExit(f"--cases: expected T,B,D,H of positive ints, got {part!r}")
        cases.append(values)
    return cases


def cell(key, spec="", suffix=""):
    """A column's text for a row: the row's value under ``key`` formatted by ``spec`` ('.3f',
    '.1e', ...), then ``suffix`` ('x' after a ratio)."""
    return lambda row: f"{row[key]:{spec}}{suffix}"


# The columns of a case's shape, in the order of --cases
SHAPE_COLUMNS = [("T", ">4", cell("T")), ("B", ">4", cell("B"))]
SHAPE_COLUMNS += [("D", ">5", cell("D")), ("H", ">5", cell("H"))]


def text_table(columns, rows):
    """A header of the columns' titles, a rule under it and a line per row, the columns one
    space apart. A column is (title, place, text): ``place`` the alignment and width of its
    title and cells ('>9', '<20'), ``text(row)`` its text for a row (see :func:`cell`)."""
    head = " ".join(f"{title:{place}}" for title, place, _ in columns)
    lines = [head, "-" * len(head)]
    lines += [" ".join(f"{text(r):{place}}" for _, place, text in columns) for r in rows]
    return "\n".join(lines)


def write_json(path, result):
    """``result`` as JSON at ``path`` (its folder made if need be), and a line saying so."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"\nwrote {out}")
