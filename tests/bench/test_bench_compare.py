"""bench/compare.py and its modules: the command line, the shapes, the peers' agreement, the
targets and the report, on tiny problems and made-up timings (nothing here is a timed assertion).
A short end-to-end run of main() writes the JSON and the chart."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

for name in ("onnx", "onnxruntime", "psutil", "torch", "threadpoolctl", "matplotlib"):
    pytest.importorskip(name)

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import compare
import compare_measure
import compare_peers
import compare_report
import compare_shapes
import compare_targets
import harness


def test_parse_shapes():
    assert compare_shapes.parse_shapes("200x1x32x64,50X32x512x512") == [
        (200, 1, 32, 64),
        (50, 32, 512, 512),
    ]
    for bad in ("1x2x3", "1x2x0x4", "axbxcxd", "1x2x3x-4"):
        with pytest.raises(ValueError, match="TxBxDxH"):
            compare_shapes.parse_shapes(bad)


def test_parse_args_defaults_and_quick():
    args = compare.parse_args([])
    assert (args.repeats, args.min_repeat_s, args.threads) == (7, 0.02, [1, 2])
    assert args.shapes == compare_shapes.GRID
    assert args.plot == args.out.with_suffix(".png")
    quick = compare.parse_args(["--quick"])
    assert (quick.repeats, quick.min_repeat_s, quick.shapes) == (
        3,
        0.005,
        compare_shapes.QUICK_GRID,
    )


@pytest.mark.parametrize("argv", [["--shapes", "1x2"], ["--threads", "0"], ["--repeats", "-1"]])
def test_parse_args_rejects(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        compare.parse_args(argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    "dtype, expected",
    [
        (
            "default",
            [("float32", (200, 1, 32, 64)), ("float32", (7, 1, 2, 3))]
            + [("float64", (200, 1, 32, 64))],
        ),
        ("float32", [("float32", (200, 1, 32, 64)), ("float32", (7, 1, 2, 3))]),
        ("float64", [("float64", (200, 1, 32, 64)), ("float64", (7, 1, 2, 3))]),
    ],
)
def test_work_list(dtype, expected):
    args = compare.parse_args(["--shapes", "200x1x32x64,7x1x2x3", "--dtype", dtype])
    assert [(np.dtype(d).name, s) for d, s in compare_shapes.work_list(args)] == expected


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_peers_agree_on_a_tiny_problem(dtype):
    p = compare_shapes.make_problem((5, 3, 4, 6), dtype)
    notes = []
    with harness.thread_count(1):
        runners = compare_peers.all_runners(p, 1, notes)
        for mode in compare_shapes.MODES:
            named = {
                lib: to_named(run())
                for lib, r in runners.items()
                if mode in r
                for run, to_named in [r[mode]]
            }
            worst = compare_measure.check_agreement(p, mode, named)
            assert worst and max(worst.values()) <= compare_measure.TOL[p.dtype]
    assert next(iter(runners)) == "rnnfast" and "torch" in runners and "numpy" in runners
    assert ("ort" in runners) or any(n.startswith("ORT skipped") for n in notes)


def test_disagreement_aborts():
    p = compare_shapes.make_problem((2, 1, 2, 2), np.float32)
    named = {"a": {"y": np.ones(3)}, "b": {"y": 2 * np.ones(3)}, "c": {"y": np.ones(4)}}
    with pytest.raises(SystemExit, match=r"DISAGREEMENT: float32 2x1x2x2 mode train"):
        compare_measure.check_agreement(p, "train", named)


ROOF = {
    "dtype": "float32",
    "threads": 1,
    "matmul_n": 2048,
    "matmul_gflops": 100.0,
    "matvec_shape": [1024, 1024],
    "matvec_bytes": 4 << 20,
    "matvec_bytes_per_s": 20e9,
    "blas": [],
}


def made_up_rows(threads=(1, 2)):
    """Result rows of the streaming shape with fixed timings: rnnfast 1 ms, the peers slower."""
    p = compare_shapes.make_problem(compare_shapes.STREAMING_SHAPE, np.float32)
    rows = []
    for n in threads:
        for mode in compare_shapes.MODES:
            libs = ("rnnfast", "torch", "numpy") if mode == "train" else compare_peers.LIBS
            t = {lib: harness.timing([1e-3 * (i + 1) / n] * 3, 4) for i, lib in enumerate(libs)}
            row = compare_measure.make_row(p, n, mode, t, dict(ROOF, threads=n))
            row["others_cpus"] = 0.0
            rows.append(row)
    return rows


def test_rows_and_targets():
    rows = made_up_rows()
    row = rows[0]
    assert row["label"] == "200x1x32x64" and row["shape"] == {"T": 200, "B": 1, "D": 32, "H": 64}
    assert row["speedup"] == pytest.approx({"torch": 2.0, "ort": 3.0, "numpy": 4.0})
    assert "ort" not in rows[2]["speedup"]  # train
    targets = compare_targets.evaluate_targets(rows)
    by_name = {}
    for t in targets:
        by_name.setdefault(t["target"], []).append(t)
    assert all(not t["met"] for t in by_name["streaming 200x1x32x64: forward per step <= 0.25 us"])
    assert all(t["met"] for t in by_name["2 threads never slower than 1"])
    assert all(t["met"] for t in by_name[">= 2x NumPy reference where H <= 256"])


def test_report(capsys):
    rows = made_up_rows()
    roofs = {("float32", n): dict(ROOF, threads=n) for n in (1, 2)}
    targets = compare_targets.evaluate_targets(rows)
    compare_report.print_report(rows, roofs, targets, ["a note"])
    out = capsys.readouterr().out.splitlines()
    head = [line for line in out if line.startswith("shape TxBxDxH")]
    assert len(head) == 2
    assert head[0] == (
        "shape TxBxDxH     mode      rnnfast ms  GFLOP/s  roof%   torch ms      x     ort ms"
        "      x   numpy ms      x  busy"
    )
    assert "200x1x32x64       train          1.000" in "\n".join(out)
    assert any(line.startswith("  [NOT MET] streaming 200x1x32x64") for line in out)
    assert out[-1] == "note: a note"


def test_main_writes_json_and_chart(tmp_path, monkeypatch, capsys):
    """A whole run on one tiny shape, the roofline and the warm-up cut short."""
    monkeypatch.setattr(harness, "WARMUP_S", 0.001)
    monkeypatch.setattr(compare, "reexec_without_blas_overrides", lambda: None)
    monkeypatch.setattr(compare, "measure_roofline", lambda d, n, r: dict(ROOF, dtype=d, threads=n))
    out = tmp_path / "c.json"
    argv = [
        "--shapes",
        "4x2x3x5",
        "--threads",
        "1",
        "--repeats",
        "1",
        "--min-repeat-ms",
        "0.1",
        "--out",
        str(out),
    ]
    compare.main(argv)
    printed = capsys.readouterr().out
    assert f"wrote {out} and {out.with_suffix('.png')}" in printed
    assert out.with_suffix(".png").stat().st_size > 0
    doc = json.loads(out.read_text())
    assert list(doc) == [
        "date",
        "machine",
        "args",
        "tolerance",
        "roofline",
        "results",
        "agreement",
        "targets",
        "notes",
    ]
    assert list(doc["args"]) == [
        "quick",
        "repeats",
        "threads",
        "shapes",
        "dtype",
        "min_repeat_ms",
        "min_repeat_s",
    ]
    assert [(r["dtype"], r["label"], r["mode"]) for r in doc["results"]] == [
        ("float32", "4x2x3x5", m) for m in compare_shapes.MODES
    ]
    assert doc["tolerance"] == {"float32": 1e-4, "float64": 1e-9}
