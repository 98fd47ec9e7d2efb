"""The docs' charts (docs/charts/, issue 44) are fresh: each one's source JSON is committed and
the chart was drawn from it as it stands.

The rule: bench/docs_charts.py records in each PNG's metadata the path of its source JSON and the
SHA-256 of that JSON's bytes; a chart is up to date when the JSON exists and still hashes to the
recorded value (so the chart was drawn from it, after it was written). Content hashes, not file
times: a fresh clone gives every file the time of the checkout, and git records none.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHARTS = ("performance", "choosing_a_cell", "quantization", "threads")


def test_every_chart_has_its_json_and_is_newer_than_it():
    if importlib.util.find_spec("PIL") is None:
        pytest.skip("Pillow (matplotlib's dependency) not installed: the PNG metadata is unread")
    done = subprocess.run(
        [sys.executable, "-m", "bench.docs_charts", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (
        f"stale or missing charts (rerun `python -m bench.docs_charts`):\n{done.stdout}"
        f"{done.stderr}"
    )


def test_each_chart_page_includes_its_chart():
    for name in CHARTS:
        assert (ROOT / "docs" / "charts" / f"{name}.png").is_file(), name
        inc = ROOT / "docs" / "charts" / f"{name}.inc"
        assert f"/charts/{name}.png" in inc.read_text(), name
        page = (ROOT / "docs" / f"{name}.rst").read_text()
        assert f".. include:: charts/{name}.inc" in page, name
