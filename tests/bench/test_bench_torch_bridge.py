"""bench/interop/torch_bridge.py on a tiny run: the command line, one row per case with both sides'
weight_hh gradients in agreement, the table and the JSON (no timed assertion)."""

from __future__ import annotations

import json

import pytest

for name in ("psutil", "torch", "threadpoolctl"):
    pytest.importorskip(name)

from bench.interop import torch_bridge


def test_parse_cases():
    assert torch_bridge.parse_cases("100,1,32,32;5,2,3,4") == [(100, 1, 32, 32), (5, 2, 3, 4)]
    for bad in ("1,2,3", "1,2,0,4", "a,b,c,d"):
        with pytest.raises(SystemExit, match="T,B,D,H"):
            torch_bridge.parse_cases(bad)


RUNS = {
    "sgd": ("rnn", "sgd", []),
    "adam-time-major": ("rnn", "adam", ["--time-major"]),
    "gru-sgd": ("gru", "sgd", []),
    "lstm-adam-time-major": ("lstm", "adam", ["--time-major"]),
}


@pytest.mark.parametrize("cell, optimizer, layout", RUNS.values(), ids=RUNS.keys())
def test_a_tiny_run_writes_its_rows(tmp_path, capsys, cell, optimizer, layout):
    out = tmp_path / "bridge.json"
    torch_bridge.main(
        [
            "--cell",
            cell,
            "--cases",
            "6,3,4,5;2,1,3,3",
            "--optimizer",
            optimizer,
            *layout,
            "--repeats",
            "1",
            "--min-repeat-s",
            "0.001",
            "--out",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    assert result["isa"] and result["threads"] == 1 and result["sgemm_gflops"] > 0
    assert result["cell"] == cell
    assert [(r["T"], r["B"], r["D"], r["H"]) for r in result["rows"]] == [
        (6, 3, 4, 5),
        (2, 1, 3, 3),
    ]
    for r in result["rows"]:
        assert r["rel_diff_dweight_hh"] < 1e-4
        assert r["torch_ms"] > 0 and r["bridge_ms"] > 0 and r["kernels_ms"] > 0
        assert r["ratio"] == pytest.approx(r["torch_ms"] / r["bridge_ms"])
    printed = capsys.readouterr().out
    assert "ratio" in printed and f"optimizer {optimizer}" in printed
    assert f"cell {cell}" in printed and f"Training step ({cell.upper()} +" in printed
    assert ("time-major" if layout else "batch_first") in printed
