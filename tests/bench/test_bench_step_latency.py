"""bench/layers/step_latency.py on a tiny run: the command line, a row per cell and shape with
every timed part, the targets only on their shape, the table and the JSON (no timed
assertion)."""

from __future__ import annotations

import json

import pytest

for name in ("psutil", "torch", "threadpoolctl"):
    pytest.importorskip(name)

from bench.layers import step_latency


def test_parse_shapes():
    assert step_latency.parse_shapes("1,64,64;3,2,5") == [(1, 64, 64), (3, 2, 5)]
    for bad in ("1,2", "0,2,3", "a,b,c"):
        with pytest.raises(SystemExit, match="B,D,H"):
            step_latency.parse_shapes(bad)


def test_unknown_cells_are_named():
    with pytest.raises(SystemExit, match="elman"):
        step_latency.main(["--cells", "rnn,elman"])


def test_a_tiny_run_writes_its_rows(tmp_path, capsys):
    out = tmp_path / "latency.json"
    step_latency.main(
        ["--shapes", "1,64,64;2,3,5", "--repeats", "1", "--out", str(out)]
        + ["--min-repeat-s", "0.001", "--warmup-s", "0.01"]
    )
    result = json.loads(out.read_text())
    assert result["isa"] and "1 thread" in result["machine"]
    rows = result["rows"]
    assert [(r["cell"], r["B"], r["D"], r["H"]) for r in rows] == [
        (c, *s) for c in ("rnn", "gru", "lstm") for s in ((1, 64, 64), (2, 3, 5))
    ]
    for r in rows:
        for part in ("step", "bound", "unbound", "call", "torch"):
            assert r[f"{part}_us"] > 0
        assert ("target_us" in r) == ((r["B"], r["D"], r["H"]) == (1, 64, 64))
    assert "torch/step" in capsys.readouterr().out
