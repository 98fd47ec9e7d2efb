"""bench/layers/streams_per_core.py on a tiny run: the bisection on a known cost, a row per
cell, size and kind with torch on the float32 rows only, the table and the JSON (no timed
assertion)."""

from __future__ import annotations

import json

import pytest

for name in ("psutil", "torch", "threadpoolctl"):
    pytest.importorskip(name)

from bench.layers import streams_per_core


@pytest.mark.parametrize(("per_stream", "cap", "expected"), [(1.0, 10_000, 100), (1.0, 50, 50)])
def test_the_largest_n_within_the_budget(per_stream, cap, expected):
    asked = []

    def seconds(n):
        asked.append(n)
        return n * per_stream

    n, t = streams_per_core.largest_within(seconds, 100.5, cap)
    assert (n, t) == (expected, expected * per_stream)
    assert len(asked) < 25


def test_over_budget_at_one_stream_is_zero():
    assert streams_per_core.largest_within(lambda n: 2.0, 1.0, 100) == (0, None)


def test_unknown_kinds_are_named():
    with pytest.raises(SystemExit, match="fp8"):
        streams_per_core.main(["--kinds", "float32,fp8"])


def test_a_tiny_run_writes_its_rows(tmp_path, capsys):
    out = tmp_path / "streams.json"
    streams_per_core.main(
        ["--cells", "rnn,lstm", "--sizes", "8", "--kinds", "float32,int8", "--budget-ms", "5"]
        + ["--max-streams", "4", "--repeats", "1", "--min-repeat-s", "0.001"]
        + ["--warmup-s", "0.001", "--out", str(out)]
    )
    result = json.loads(out.read_text())
    assert result["isa"] and "1 thread" in result["machine"]
    rows = result["rows"]
    assert [(r["cell"], r["H"], r["kind"]) for r in rows] == [
        (c, 8, k) for c in ("rnn", "lstm") for k in ("float32", "int8")
    ]
    for r in rows:
        assert 0 <= r["streams_n"] <= 4 and 0 <= r["loop_n"] <= 4
        assert (r["torch_n"] is None) == (r["kind"] != "float32")
    text = capsys.readouterr().out
    assert "float32 only" in text and "vs torch" in text
