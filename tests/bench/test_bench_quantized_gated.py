"""bench/kernels/quantized_gated.py (python -m bench.kernels.quantized_gated): a short run of
main() on a tiny case, one repeat, checked for its rows (every variant of every cell, their
fields, errors within rnnfast.quantize's bound), its targets and its JSON; the command line's
refusals and the error bound's check. Nothing here is a timed assertion."""

from __future__ import annotations

import json

import pytest

for name in ("torch", "psutil", "threadpoolctl"):
    pytest.importorskip(name)

from bench.kernels import quantized_gated as bench
from rnnfast import _core
from rnnfast.quantize import ERROR_BOUND

QUICK = ["--repeats", "1", "--min-repeat-s", "0.0001", "--warmup-s", "0", "--threads", "1"]
FIELDS = {
    "cell", "T", "B", "D", "H", "threads", "lib", "kind", "path", "median_s", "samples_s",
    "versus_float32_isa", "speedup", "versus_torch_int8", "weight_bytes", "relative_error",
}  # fmt: skip


def expected_variants():
    """(lib, kind, path) of every row of a case, "auto" standing for "auto=<path>"."""
    out = {("rnnfast", "float32", isa) for isa in _core.supported_isas()}
    for kind in ("int8", "bf16"):
        out |= {("rnnfast", kind, "auto")}
        out |= {("rnnfast", kind, path) for path in _core.quantized_paths(kind)}
    return out | {("torch", "float32", "-"), ("torch", "int8", "dynamic")}


def test_main_rows_targets_and_json(tmp_path, capsys):
    out = tmp_path / "q.json"
    rows = bench.main(["--cases", "3,2,5,16", "--out", str(out), *QUICK])
    printed = capsys.readouterr().out
    assert "float ISA" in printed and "issue 24's targets" in printed
    assert {r["cell"] for r in rows} == {"gru", "lstm"}
    auto = {kind: _core.quantized_path(kind) for kind in ("int8", "bf16")}
    for cell, gates in (("gru", 3), ("lstm", 4)):
        mine = [r for r in rows if r["cell"] == cell]
        keys = {
            (r["lib"], r["kind"], "auto" if r["path"].startswith("auto=") else r["path"])
            for r in mine
        }
        assert keys == expected_variants() and len(mine) == len(keys)
        for r in mine:
            assert set(r) == FIELDS
            assert (r["T"], r["B"], r["D"], r["H"], r["threads"]) == (3, 2, 5, 16, 1)
            assert r["median_s"] > 0 and r["speedup"] > 0 and r["versus_torch_int8"] > 0
            assert len(r["samples_s"]) == 1
            if r["lib"] == "rnnfast" and r["kind"] in ERROR_BOUND:
                assert r["relative_error"] < ERROR_BOUND[r["kind"]]
            if r["path"].startswith("auto="):
                assert r["path"] == f"auto={auto[r['kind']]}"
            if r["kind"] == "float32":  # W_ih (G*H, D) and W_hh (G*H, H) in float32
                assert r["weight_bytes"] == 4 * gates * 16 * (5 + 16)
                assert r["relative_error"] < 1e-5
        torch_int8 = next(r for r in mine if r["lib"] == "torch" and r["kind"] == "int8")
        assert torch_int8["versus_torch_int8"] == 1.0
        assert torch_int8["weight_bytes"] == gates * 16 * (5 + 16)
        # a float32 row is measured against itself
        for r in mine:
            if r["lib"] == "rnnfast" and r["kind"] == "float32":
                assert r["speedup"] == 1.0 and r["versus_float32_isa"] == r["path"]
    saved = json.loads(out.read_text())
    assert saved["rows"] == rows
    assert saved["meta"]["threads"] == 1 and saved["meta"]["isa"] == _core.active_isa()
    # two targets' checks (int8, bf16: never slower) per cell at this shape
    assert len(saved["targets"]) == 4
    assert all(set(t) == {"target", "speedup", "met"} for t in saved["targets"])
    assert _core.quantized_path("int8") == auto["int8"]  # the forced paths were reset


def test_error_bound_stops_before_timing(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "ERROR_BOUND", {**ERROR_BOUND, "int8": 0.0})
    with pytest.raises(SystemExit, match="QUANTIZED OUT OF BOUND: gru 2,1,3,16 int8 on "):
        bench.main(["--cells", "gru", "--cases", "2,1,3,16", "--out", str(tmp_path / "q.json")])
    assert not (tmp_path / "q.json").exists()


def test_command_line_refusals():
    assert bench.parse_cells("LSTM, gru") == ["gru", "lstm"]
    for bad in ("", "rnn", "gru,transformer"):
        with pytest.raises(SystemExit, match="--cells: expected some of gru, lstm"):
            bench.parse_cells(bad)
    with pytest.raises(SystemExit, match="--threads: expected a positive int, got 0"):
        bench.main(["--threads", "0"])
