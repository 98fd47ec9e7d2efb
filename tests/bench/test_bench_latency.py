"""bench/peers/latency/ (python -m bench.peers.latency): a run of main() on one tiny shape, one
repeat and a small roofline, checked for its structure: a row per format, mode, cell and thread
count with rnnfast's time, finite ratios and bounds, two threads against one, compare's grid
rows, the JSON; and the command line's refusals. Nothing here is a timed assertion."""

from __future__ import annotations

import json
import math

import pytest

for name in ("onnx", "onnxruntime", "psutil", "torch", "threadpoolctl"):
    pytest.importorskip(name)

from bench import _timing
from bench.peers.compare import roofline as compare_roofline
from bench.peers.latency import bound, cli
from rnnfast.precision import bf16_available

TINY = [
    "--shapes", "3x2x5x16", "--grid-shapes", "2x2x3x8", "--threads", "1,2", "--repeats", "1",
    "--min-repeat-ms", "0", "--warmup-ms", "0", "--roofline-repeats", "1", "--compare-grid",
    "--skip", "openvino",
]  # fmt: skip


@pytest.fixture(autouse=True)
def small_measurements(monkeypatch):
    """A 64^3 matmul, a short read, no warm-ups and no garbage collection before each
    library's repeats: the figures are not what is tested."""
    monkeypatch.setattr(compare_roofline, "MATMUL_N", 64)
    monkeypatch.setattr(bound, "BATCH_READ_BYTES", 1 << 20)
    monkeypatch.setattr(_timing, "WARMUP_S", 0.001)
    monkeypatch.setattr(_timing.gc, "collect", lambda: 0)  # 0.1-0.3 s each with torch loaded


def finite(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


def test_tiny_run_has_every_row_ratio_and_bound(tmp_path, capsys):
    out = tmp_path / "latency.json"
    doc = cli.main([*TINY, "--json", str(out)])
    printed = capsys.readouterr().out
    assert json.loads(out.read_text()) == json.loads(json.dumps(doc))
    assert doc["machine"]["cpu"] and doc["machine"]["rnnfast_isa"]
    assert finite(doc["bounds"]["l2"]["bytes_per_s"])
    formats = ["float32", "int8"] + (["bf16"] if bf16_available() else [])
    rows = doc["rows"]
    # float32 and bf16: 2 modes; int8: forward only; 3 cells, 2 thread counts
    expected = sum(2 if f != "int8" else 1 for f in formats) * 3 * 2
    assert len(rows) == expected
    for r in rows:
        assert finite(r["libs"]["rnnfast"]["median_ms"])
        assert finite(r["bound_ms"]) and finite(r["of_bound"])
        assert r["bound"] == "l2"  # B = 2 <= 16
        assert isinstance(r["target_met"], bool)
        if r["best_peer"] is not None:
            assert r["best_peer"] in r["libs"] and finite(r["over_best_peer"])
        if r["threads"] == 2:
            assert finite(r["over_1_thread"]) and r["threads_goal"] == 0.97
        if r["stepped_threads"] is not None:
            assert 1 <= r["stepped_threads"][0] <= r["threads"]
    float_forward = [r for r in rows if (r["format"], r["mode"]) == ("float32", "forward")]
    assert all({"torch", "ort", "kernel"} <= r["libs"].keys() for r in float_forward)
    int8_lstm = [r for r in rows if (r["format"], r["cell"]) == ("int8", "lstm")]
    assert all({"torch", "ort"} <= r["libs"].keys() for r in int8_lstm)
    assert any("no nn.RNN" in n for n in doc["notes"])
    # the grid: compare's 3 modes per cell at each thread count, 2 threads against 1
    assert len(doc["grid"]) == 3 * 3 * 2
    assert all(finite(r["over_1_thread"]) for r in doc["grid"] if r["threads"] == 2)
    for title in ("float32 forward", "int8 forward", "targets", "compare's grid"):
        assert title in printed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--formats", "fp8"], "--formats"),
        (["--modes", "backward"], "--modes"),
        (["--skip", "jax"], "--skip"),
        (["--shapes", "1x2x3"], "TxBxDxH"),
        (["--threads", "0"], ">= 1"),
        (["--formats", "none"], "nothing to run"),
    ],
)
def test_command_line_refusals(argv, message, capsys):
    with pytest.raises(SystemExit) as refused:
        cli.parse_args(argv)
    assert message in str(refused.value.code) + capsys.readouterr().err
