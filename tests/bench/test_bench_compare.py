"""bench/peers/compare/ (python -m bench.peers.compare): the command line, the shapes, the
peers' agreement, the targets and the report, on tiny problems and made-up timings (nothing here
is a timed assertion). A short end-to-end run of main() writes the JSON and the chart."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

for name in ("onnx", "onnxruntime", "psutil", "torch", "threadpoolctl", "matplotlib"):
    pytest.importorskip(name)

import rnnfast
from bench import _common
from bench.peers.compare import cli as compare
from bench.peers.compare import measure as compare_measure
from bench.peers.compare import quantized as compare_quantized
from bench.peers.compare import report as compare_report
from bench.peers.compare import roofline as compare_roofline
from bench.peers.compare import runners as compare_peers
from bench.peers.compare import shapes as compare_shapes
from bench.peers.compare import targets as compare_targets


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
    assert (args.repeats, args.min_repeat_s, args.threads) == (5, 0.02, [1, 2])
    assert args.warmup_s == _common.WARMUP_S
    assert args.shapes == compare_shapes.GRID + compare_shapes.EXTRA
    assert args.plot == args.out.with_suffix(".png")
    supported = rnnfast._core.supported_isas()
    assert args.isas == [i for i in supported if i != "baseline"]
    quick = compare.parse_args(["--quick"])
    assert (quick.repeats, quick.min_repeat_s, quick.warmup_s, quick.shapes) == (
        3,
        0.005,
        0.1,
        compare_shapes.QUICK_GRID + compare_shapes.QUICK_EXTRA,
    )


def test_extra_shapes_and_isas():
    assert compare.parse_args(["--shapes", "5x1x2x3"]).shapes == [(5, 1, 2, 3)]
    given = compare.parse_args(["--shapes", "5x1x2x3", "--extra", "7x2x3x4,5x1x2x3"])
    assert given.shapes == [(5, 1, 2, 3), (7, 2, 3, 4)]  # a shape in both runs once
    assert compare.parse_args(["--extra", "none"]).shapes == compare_shapes.GRID
    assert compare.parse_args(["--isas", "none"]).isas == []
    assert compare.parse_args(["--isas", "baseline"]).isas == ["baseline"]
    assert not any(compare_shapes.on_grid(s) for s in compare_shapes.EXTRA)
    assert all(compare_shapes.on_grid(s) for s in compare_shapes.GRID)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--extra", "3x3"], "--extra: expected TxBxDxH"),
        (["--isas", "avx2,sse9"], "--isas: expected ISAs this CPU runs .*, got sse9"),
    ],
)
def test_parse_args_names_the_bad_option(argv, message, capsys):
    with pytest.raises(SystemExit):
        compare.parse_args(argv)
    assert re.search(message, capsys.readouterr().err)


def test_isas_to_time():
    assert compare_measure.isas_to_time([], "avx512") == []
    assert compare_measure.isas_to_time(["avx512"], "avx512") == []
    assert compare_measure.isas_to_time(["avx2", "avx512", "avx2"], "avx512") == ["avx512", "avx2"]


def test_on_isa_switches_and_restores():
    active = rnnfast._core.active_isa()
    seen = _common.on_isa(rnnfast._core.active_isa, "baseline")()
    assert seen == "baseline" and rnnfast._core.active_isa() == active

    def fails():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        _common.on_isa(fails, "baseline")()
    assert rnnfast._core.active_isa() == active


def test_machine_description():
    cpu = _common.cpu_model()
    assert cpu and cpu != "unknown"
    assert "CPU capability" in _common.torch_blas()
    assert _common.numpy_blas_summary()


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
            + [("float64", (200, 1, 32, 64)), ("float64", (7, 1, 2, 3))],
        ),
        ("float32", [("float32", (200, 1, 32, 64)), ("float32", (7, 1, 2, 3))]),
        ("float64", [("float64", (200, 1, 32, 64)), ("float64", (7, 1, 2, 3))]),
    ],
)
def test_work_list(dtype, expected):
    args = compare.parse_args(["--shapes", "200x1x32x64,7x1x2x3", "--dtype", dtype])
    assert [(np.dtype(d).name, s) for d, s in compare_shapes.work_list(args)] == expected


def test_quick_work_list_has_float64_on_its_subset_only():
    args = compare.parse_args(["--quick"])
    f64 = [s for d, s in compare_shapes.work_list(args) if d == np.float64]
    assert f64 == [s for s in args.shapes if s in compare_shapes.QUICK_FLOAT64_SUBSET]
    assert f64 and len(f64) < len(args.shapes)


@pytest.mark.parametrize("shape", [(5, 3, 4, 6), (1, 2, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_peers_agree_on_a_tiny_problem(dtype, shape):
    """Every library, the unfused BLAS anchor included, gives the same outputs and gradients
    (T = 1 has no recurrent product at all)."""
    p = compare_shapes.make_problem(shape, dtype)
    notes = []
    with _common.thread_count(1):
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
    assert next(iter(runners)) == "rnnfast" and {"torch", "numpy", "blas"} <= runners.keys()
    assert ("ort" in runners) or any(n.startswith("ORT skipped") for n in notes)


def test_disagreement_aborts():
    p = compare_shapes.make_problem((2, 1, 2, 2), np.float32)
    named = {"a": {"y": np.ones(3)}, "b": {"y": 2 * np.ones(3)}, "c": {"y": np.ones(4)}}
    with pytest.raises(SystemExit, match=r"DISAGREEMENT: float32 2x1x2x2 mode train"):
        compare_measure.check_agreement(p, "train", named)


ROOF = compare_roofline.roofline_record(
    "float32", 1, {"numpy": 80.0, "torch": 100.0}, {"numpy": 20e9, "torch": 15e9}, [1024, 1024], []
)


def test_roofline_takes_the_faster_library():
    assert (ROOF["matmul_gflops"], ROOF["matmul_from"]) == (100.0, "torch")
    assert (ROOF["matvec_bytes_per_s"], ROOF["matvec_from"]) == (20e9, "numpy")
    assert ROOF["matmul_gflops_by_lib"] == {"numpy": 80.0, "torch": 100.0}
    assert ROOF["matvec_bytes"] == 4 << 20
    assert compare_roofline.best_of({"numpy": 3.0, "torch": 2.0}) == ("numpy", 3.0)
    p = compare_shapes.make_problem((50, 32, 512, 512), np.float32)  # compute-bound
    flops = compare_shapes.mode_flops(p, "train")
    assert compare_roofline.roofline_seconds(p, "train", ROOF) == pytest.approx(flops / 100e9)
    p = compare_shapes.make_problem((100, 1, 8, 1024), np.float32)  # bound by W_hh's reads
    weights_s = 100 * p.w_hh.nbytes / 20e9
    assert compare_roofline.roofline_seconds(p, "fwd_seq", ROOF) == pytest.approx(weights_s)


def test_measure_roofline_measures_both_libraries(monkeypatch):
    monkeypatch.setattr(compare_roofline, "MATMUL_N", 64)
    monkeypatch.setattr(_common, "WARMUP_S", 0.001)
    roof = compare_roofline.measure_roofline(np.float32, 1, 1)
    assert roof["matmul_gflops_by_lib"].keys() == {"numpy", "torch"}
    assert roof["matmul_gflops"] == max(roof["matmul_gflops_by_lib"].values()) > 0
    assert roof["matvec_bytes_per_s"] == max(roof["matvec_bytes_per_s_by_lib"].values()) > 0
    assert roof["matmul_from"] in ("numpy", "torch") and roof["matmul_n"] == 64


def row_at(
    shape=(10, 8, 4, 256),
    mode="fwd_seq",
    dtype=np.float32,
    threads=1,
    fractions=None,
    isa_seconds=None,
):
    """A result row whose libraries run at the given fractions of the roofline (so that
    speed-up = rnnfast's fraction / the peer's), and rnnfast per ISA at the given seconds."""
    p = compare_shapes.make_problem(shape, dtype)
    roof = dict(ROOF, dtype=np.dtype(dtype).name, threads=threads)
    roof_s = compare_roofline.roofline_seconds(p, mode, roof)
    timings = {lib: _common.timing([roof_s / f] * 3, 1) for lib, f in fractions.items()}
    by_isa = {isa: _common.timing([t] * 3, 1) for isa, t in (isa_seconds or {}).items()}
    row = compare_measure.make_row(p, threads, mode, timings, roof, by_isa, active="avx512")
    row["others_cpus"] = 0.0
    return row


@pytest.mark.parametrize(
    "mode, mine, peer, met, capped",
    [
        ("fwd_seq", 0.65, 0.5, True, False),  # 1.3x torch
        ("fwd_seq", 0.60, 0.5, False, False),  # 1.2x torch; the roofline is far
        ("fwd_seq", 0.86, 0.9, True, True),  # 1.25x torch would pass the roofline: 86% >= 85%
        ("fwd_last", 0.84, 0.9, False, True),
        ("train", 0.81, 0.9, True, True),  # training needs 80%
        ("train", 0.79, 0.9, False, True),
        ("fwd_seq", 1.2, 0.9, True, False),  # 1.33x torch: met by the multiple
        ("fwd_seq", 1.05, 1.0, False, False),  # rnnfast above a roofline measured low: no cap
        ("train", 0.9, 1.1, False, False),  # torch above it: no cap either
    ],
)
def test_multiple_of_peer_and_its_roofline_cap(mode, mine, peer, met, capped):
    r = row_at(mode=mode, fractions={"rnnfast": mine, "torch": peer})
    assert r["speedup"]["torch"] == pytest.approx(mine / peer)
    c = compare_targets.multiple_of_peer(r, "torch", 1.25, "t")
    assert (c["met"], "meets it" in c["detail"]) == (met, capped)
    assert c["figure"] == pytest.approx(mine / peer) and c["goal"] == 1.25


def by_target(targets):
    out = {}
    for t in targets:
        out.setdefault(t["target"], []).append(t)
    return out


def test_float32_and_float64_targets():
    fast = {"rnnfast": 0.6, "torch": 0.15, "ort": 0.3, "numpy": 0.2, "blas": 0.5}
    rows = [
        row_at((10, 8, 4, 128), "fwd_seq", fractions=fast),  # 4x torch, 2x ORT
        row_at((10, 8, 4, 256), "train", fractions={**fast, "torch": 0.3}),  # 2x torch
        row_at((10, 8, 4, 128), "train", np.float64, fractions={**fast, "numpy": 0.55}),
    ]
    t = by_target(compare_targets.evaluate_targets(rows))
    assert [c["met"] for c in t["float32 forward >= 1.25x torch"]] == [True]
    assert [c["met"] for c in t["float32 forward >= 1.5x ONNX Runtime"]] == [True]
    assert [c["met"] for c in t["float32 training >= 1.25x torch"]] == [True]
    # H <= 128 only: the H = 256 row is not judged by the 3x target
    assert [(c["shape"], c["met"]) for c in t["float32 H <= 128: >= 3x torch"]] == [
        ("10x8x4x128", True)
    ]
    assert [c["met"] for c in t["float64 forward and training >= 1.2x torch"]] == [True]
    numpy64 = t["float64 forward and training >= 1.2x NumPy loop"]
    assert [(c["met"], round(c["figure"], 3)) for c in numpy64] == [(False, 1.091)]
    assert all(c["dtype"] == "float64" for c in numpy64)


def test_isa_target_on_batches_of_8_or_more():
    rows = [
        row_at(
            (10, 8, 4, 64), fractions={"rnnfast": 0.5}, isa_seconds={"avx512": 1.0, "avx2": 1.2}
        ),
        row_at(
            (10, 16, 4, 64), fractions={"rnnfast": 0.5}, isa_seconds={"avx512": 1.0, "avx2": 0.9}
        ),
        row_at(
            (10, 7, 4, 64), fractions={"rnnfast": 0.5}, isa_seconds={"avx512": 1.0, "avx2": 0.5}
        ),
        row_at((10, 9, 4, 64), fractions={"rnnfast": 0.5}),  # not timed per ISA
    ]
    assert rows[0]["isa_ratio"] == pytest.approx({"avx2": 1.2})
    checks = compare_targets.isa_targets(rows)
    assert [(c["shape"], c["met"]) for c in checks] == [("10x8x4x64", True), ("10x16x4x64", False)]
    assert checks[1]["figure"] == pytest.approx(0.9)


def test_streaming_target_per_isa():
    r = row_at(
        compare_shapes.STREAMING_SHAPE,
        fractions={"rnnfast": 0.5},
        isa_seconds={"avx512": 40e-6, "avx2": 60e-6},  # 0.2 and 0.3 us per step
    )
    checks = compare_targets.streaming_targets([r])
    isa_of = [re.search(r"\((\w+)\)$", c["target"]).group(1) for c in checks]
    assert list(zip(isa_of, [c["met"] for c in checks])) == [("avx512", True), ("avx2", False)]
    assert checks[1]["figure"] == pytest.approx(0.3)


def test_scaling_targets():
    one = row_at((10, 8, 4, 512), "train", threads=1, fractions={"rnnfast": 0.5})
    two = row_at((10, 8, 4, 512), "train", threads=2, fractions={"rnnfast": 0.5})
    two["libs"]["rnnfast"]["median_ms"] = one["libs"]["rnnfast"]["median_ms"] / 1.7
    checks = by_target(compare_targets.scaling_targets([one, two]))
    assert [c["met"] for c in checks["float32 2 threads never slower than 1"]] == [True]
    (c,) = checks["float32 2 threads >= 1.8x 1 thread where H >= 512"]
    assert not c["met"] and c["figure"] == pytest.approx(1.7)


def made_up_rows(threads=(1, 2)):
    """Result rows of the streaming shape with fixed timings: rnnfast 1 ms, the peers slower."""
    p = compare_shapes.make_problem(compare_shapes.STREAMING_SHAPE, np.float32)
    rows = []
    for n in threads:
        for mode in compare_shapes.MODES:
            libs = [lib for lib in compare_peers.LIBS if mode != "train" or lib != "ort"]
            t = {lib: _common.timing([1e-3 * (i + 1) / n] * 3, 4) for i, lib in enumerate(libs)}
            by_isa = {"avx512": t["rnnfast"], "avx2": _common.timing([1.5e-3 / n] * 3, 4)}
            row = compare_measure.make_row(p, n, mode, t, dict(ROOF, threads=n), by_isa, "avx512")
            row["others_cpus"] = 0.0
            rows.append(row)
    return rows


def test_rows_and_targets():
    rows = made_up_rows()
    row = rows[0]
    assert row["label"] == "200x1x32x64" and row["shape"] == {"T": 200, "B": 1, "D": 32, "H": 64}
    assert row["grid"] and row["active_isa"] == "avx512"
    assert row["speedup"] == pytest.approx({"torch": 2.0, "ort": 3.0, "numpy": 4.0, "blas": 5.0})
    assert row["isa_ratio"] == pytest.approx({"avx2": 1.5})
    assert "ort" not in rows[2]["speedup"]  # train
    t = by_target(compare_targets.evaluate_targets(rows))
    streaming = "float32 streaming 200x1x32x64: forward <= 0.25 us per step (avx512)"
    assert all(not c["met"] for c in t[streaming])  # 1 ms / 200 steps = 5 us
    assert all(c["met"] for c in t["float32 2 threads never slower than 1"])
    assert all(c["met"] for c in t["float32 H <= 128: >= 3x torch"]) is False  # 2x torch


def test_report(capsys):
    rows = made_up_rows()
    roofs = {("float32", n): dict(ROOF, threads=n) for n in (1, 2)}
    targets = compare_targets.evaluate_targets(rows)
    compare_report.print_report(rows, roofs, targets, ["a note"])
    out = capsys.readouterr().out.splitlines()
    head = [line for line in out if line.startswith("shape TxBxDxH")]
    assert len(head) == 2
    assert (
        head[0].split()
        == (
            "shape TxBxDxH mode rnnfast ms GFLOP/s roof% torch ms x ort ms x numpy ms x "
            "blas ms x avx2 x busy"
        ).split()
    )
    text = "\n".join(out)
    assert re.search(r"^200x1x32x64 +train +1\.000 .* 1\.50 +0\.0$", text, re.M)
    assert "matmul 2048^3 GFLOP/s numpy 80.0, torch 100.0 -> torch" in text
    assert "GB/s numpy 20.0, torch 15.0 -> numpy" in text
    assert any(line.startswith("  [MISSED] float32 streaming 200x1x32x64") for line in out)
    assert "           missed: 200x1x32x64 fwd_seq 5.00us" in out
    assert out[-1] == "note: a note"


def test_header(capsys):
    compare_report.print_header(compare.parse_args(["--isas", "baseline"]))
    out = capsys.readouterr().out
    assert f"cpu: {_common.cpu_model()}" in out
    assert f"rnnfast isa: {rnnfast._core.active_isa()} " in out
    assert "numpy BLAS: " in out and "torch BLAS: " in out and "CPU capability" in out
    assert ("also timed: baseline" in out) == (rnnfast._core.active_isa() != "baseline")


def test_main_writes_json_and_chart(tmp_path, monkeypatch, capsys):
    """A whole run on one tiny shape, on every ISA, the roofline and the warm-up cut short."""
    monkeypatch.setattr(compare, "reexec_without_blas_overrides", lambda: None)
    monkeypatch.setattr(compare, "measure_roofline", lambda d, n, r: dict(ROOF, dtype=d, threads=n))
    out = tmp_path / "c.json"
    isas = rnnfast._core.supported_isas()
    argv = ["--shapes", "4x2x3x5", "--threads", "1", "--repeats", "1", "--min-repeat-ms", "0.1"]
    argv += ["--warmup-ms", "1"]
    compare.main([*argv, "--isas", ",".join(isas), "--out", str(out)])
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
        "quantized",
        "notes",
    ]
    assert [(r["label"], r["mode"]) for r in doc["quantized"]] == [
        ("4x2x3x5", m) for m in compare_quantized.FORWARD_MODES
    ]
    assert list(doc["args"]) == [
        "quick",
        "repeats",
        "threads",
        "shapes",
        "extra",
        "dtype",
        "isas",
        "min_repeat_ms",
        "warmup_ms",
        "no_quantized",
        "min_repeat_s",
        "warmup_s",
    ]
    machine = doc["machine"]
    assert machine["cpu"] == _common.cpu_model()
    assert machine["rnnfast_isa"] == rnnfast._core.active_isa()
    assert sorted(machine["rnnfast_isas_timed"]) == (sorted(isas) if len(isas) > 1 else [])
    assert machine["numpy_blas"] and "CPU capability" in machine["torch_blas"]
    assert [(r["dtype"], r["label"], r["mode"]) for r in doc["results"]] == [
        (d, "4x2x3x5", m) for d in ("float32", "float64") for m in compare_shapes.MODES
    ]
    for r in doc["results"]:
        assert "blas" in r["speedup"] and not r["grid"]
        if len(isas) > 1:
            assert set(r["isas"]) == set(isas)
            assert r["libs"]["rnnfast"]["samples_ms"] == r["isas"][r["active_isa"]]["samples_ms"]
    agreed = doc["agreement"][0]["max_relative_error"]["train"]
    assert agreed.keys() >= {"dx", "dweight_hh", "dh0"}
    assert doc["tolerance"] == {"float32": 1e-4, "float64": 1e-9}


# ---- the quantized rows (bench/peers/compare/quantized.py) -----------------------------------


def test_quantized_rows_on_a_tiny_problem():
    """Every forward mode gets a row: float32, int8 and bf16 times, their speed-ups, the paths,
    the bytes (int8 stores about a quarter, bf16 half of float32's) and the error bound held."""
    p = compare_shapes.make_problem((6, 3, 5, 7), np.float32)
    args = compare.parse_args(["--repeats", "1", "--min-repeat-ms", "0.1", "--warmup-ms", "1"])
    rows = compare_quantized.bench_quantized([p], [1], [], args)
    assert [r["mode"] for r in rows] == list(compare_quantized.FORWARD_MODES)
    for r in rows:
        assert set(r["median_ms"]) == {"float32", "int8", "bf16"}
        assert r["speedup_over_float32"]["int8"] > 0 and r["speedup_over_peer"] == {}
        assert r["paths"] == {m: rnnfast._core.quantized_path(m) for m in ("int8", "bf16")}
        b = r["bytes"]
        assert b["float32"] == 4 * (7 * 5 + 7 * 7)
        assert b["bf16"] == b["float32"] // 2 and b["int8"] == b["float32"] // 4 + 4 * 2 * 7
        for m in ("int8", "bf16"):
            assert 0 < r["relative_error"][m] < compare_quantized.REL_ERROR[m]


def test_quantized_results_out_of_bound_abort(monkeypatch):
    p = compare_shapes.make_problem((6, 3, 5, 7), np.float32)
    monkeypatch.setitem(compare_quantized.REL_ERROR, "int8", 1e-9)
    args = compare.parse_args(["--repeats", "1", "--min-repeat-ms", "0.1", "--warmup-ms", "1"])
    with pytest.raises(SystemExit, match="QUANTIZED OUT OF BOUND"):
        compare_quantized.bench_quantized([p], [1], [], args)


def _quantized_row(B, H, int8, bf16, path="amx"):
    return {
        "dtype": "float32",
        "threads": 1,
        "label": f"10x{B}x{H}x{H}",
        "shape": {"T": 10, "B": B, "D": H, "H": H},
        "mode": "fwd_seq",
        "speedup_over_float32": {"int8": int8, "bf16": bf16},
        "paths": {"int8": path, "bf16": path},
    }


@pytest.mark.parametrize(
    "row, expected",
    [
        (_quantized_row(1, 1024, 3.1, 1.9), {"int8 >= 3x": True, "bf16 >= 1.8x": True}),
        (_quantized_row(1, 1024, 2.9, 1.7), {"int8 >= 3x": False, "bf16 >= 1.8x": False}),
        (_quantized_row(64, 1024, 3.9, 1.2), {"int8 >= 4x": False}),
        (_quantized_row(64, 1024, 2.1, 1.2, "avx512_vnni"), {"int8 >= 2x": True}),
        (_quantized_row(64, 1024, 9.0, 1.2, "avx2"), {}),
        (_quantized_row(8, 256, 0.9, 1.0), {}),
    ],
)
def test_quantized_targets(row, expected):
    checks = compare_quantized.quantized_targets([row])
    never = {c["target"].split()[0]: c["met"] for c in checks if "never slower" in c["target"]}
    x = row["speedup_over_float32"]
    assert never == {"int8": x["int8"] >= 1, "bf16": x["bf16"] >= 1}
    named = {c["target"]: c["met"] for c in checks if "never slower" not in c["target"]}
    assert len(named) == len(expected)
    for start, met in expected.items():
        assert [v for k, v in named.items() if k.startswith(start)] == [met]
