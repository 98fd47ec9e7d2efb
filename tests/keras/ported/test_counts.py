"""The listing of ``__init__.py`` against the installed Keras test files, the ports here and
the counts table of its docstring."""

from __future__ import annotations

import ast
import importlib
import os
import re

import pytest

from . import NA, PARTLY, PASS, PORTED, REFUSED
from . import __doc__ as DOC

FOLDERS = {"masking_test.py": ("layers", "core")}  # the others are in layers/rnn


def _keras_tests(keras, filename):
    folder = FOLDERS.get(filename, ("layers", "rnn"))
    path = os.path.join(os.path.dirname(keras.__file__), "src", *folder, filename)
    if not os.path.exists(path):
        pytest.skip(f"this Keras has no {filename}")
    with open(path) as f:
        tree = ast.parse(f.read())
    return [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test")
    ]


@pytest.mark.parametrize("filename", sorted(PORTED))
def test_every_keras_test_is_listed_and_ported(keras, filename):
    listed = PORTED[filename]
    assert sorted(_keras_tests(keras, filename)) == sorted(listed)
    module = importlib.import_module(f"{__package__}.test_{filename.removesuffix('_test.py')}")
    for name, (status, _) in listed.items():
        if status != NA:
            assert callable(getattr(module, name, None)), f"{filename}: {name} not ported"


def test_table_matches_the_listing():
    rows = {}
    for line in DOC.splitlines():
        m = re.match(r"(\S+\.py|total)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", line.strip())
        if m:
            rows[m.group(1)] = tuple(int(v) for v in m.groups()[1:])
    total = [0] * 5
    for filename, tests in PORTED.items():
        statuses = [s for s, _ in tests.values()]
        counts = (len(statuses), *(statuses.count(s) for s in (PASS, PARTLY, REFUSED, NA)))
        assert rows[filename] == counts, filename
        total = [a + b for a, b in zip(total, counts)]
    assert rows["total"] == tuple(total)
