"""bench/peers/compare/ (python -m bench.peers.compare): the command line, the shapes and cells,
the peers' agreement, the targets and the report, on tiny problems and made-up timings (nothing
here is a timed assertion). A short end-to-end run of main() writes the JSON and the chart.

OpenVINO and JAX are optional peers: their tests run where they are installed, and the others
check that the run goes on without them, with a note."""

from __future__ import annotations

import json
import re
import types

import numpy as np
import pytest

for name in ("onnx", "onnxruntime", "psutil", "torch", "threadpoolctl", "matplotlib"):
    pytest.importorskip(name)

import rnnfast
from bench import _common, _timing
from bench.peers.compare import cli as compare
from bench.peers.compare import jax_peer as compare_jax
from bench.peers.compare import measure as compare_measure
from bench.peers.compare import onnx_peers as compare_onnx
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
    assert args.cells == ["rnn", "gru", "lstm"] and args.skip == []
    assert args.gated_shapes == args.shapes
    supported = rnnfast._core.supported_isas()
    assert args.isas == [i for i in supported if i != "baseline"]
    quick = compare.parse_args(["--quick"])
    assert (quick.repeats, quick.min_repeat_s, quick.warmup_s, quick.shapes) == (
        3,
        0.005,
        0.1,
        compare_shapes.QUICK_GRID + compare_shapes.QUICK_EXTRA,
    )
    assert quick.gated_shapes == compare_shapes.QUICK_GATED
    assert set(quick.gated_shapes) < set(quick.shapes)
    # --quick with shapes of one's own: every cell on them
    assert compare.parse_args(["--quick", "--shapes", "5x1x2x3"]).gated_shapes == [(5, 1, 2, 3)]


def test_no_plot_leaves_the_chart_out():
    assert compare.parse_args(["--no-plot"]).plot is None
    with pytest.raises(SystemExit):
        compare.parse_args(["--no-plot", "--plot", "x.png"])


def test_main_with_no_plot_writes_no_chart(tmp_path, monkeypatch, capsys):
    """The JSON only: no PNG, and no file named after the flag (a stray none.png once was)."""
    monkeypatch.setattr(compare, "reexec_without_blas_overrides", lambda: None)
    monkeypatch.setattr(_timing, "gc", types.SimpleNamespace(collect=lambda: 0))
    monkeypatch.setattr(compare, "measure_roofline", lambda d, n, r: dict(ROOF, dtype=d, threads=n))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "c.json"
    argv = ["--shapes", "4x2x3x5", "--threads", "1", "--repeats", "1", "--min-repeat-ms", "0.1"]
    argv += ["--warmup-ms", "1", "--skip", "jax,torch,ort,openvino,numpy,blas", "--cells", "rnn"]
    argv += ["--dtype", "float32", "--isas", "none", "--no-quantized"]
    compare.main([*argv, "--out", str(out), "--no-plot"])
    assert f"wrote {out} (no chart: --no-plot)" in capsys.readouterr().out
    assert out.exists() and [p.name for p in tmp_path.iterdir()] == ["c.json"]


def test_parse_cells_and_skip():
    args = compare.parse_args(["--cells", "LSTM,rnn", "--skip", "jax,openvino"])
    assert args.cells == ["rnn", "lstm"]  # CELLS' order
    assert args.skip == ["jax", "openvino"]
    assert compare_shapes.parse_cells("gru") == ["gru"]
    with pytest.raises(ValueError, match="--cells: expected some of rnn, gru, lstm"):
        compare_shapes.parse_cells("rnn,transformer")


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
        (["--cells", "rnn,elman"], "--cells: expected some of rnn, gru, lstm, got 'rnn,elman'"),
        (["--skip", "jax,mxnet"], "--skip: expected peers among torch, .*, got mxnet"),
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
    """Each (dtype, shape) in every cell, the cells of a shape side by side."""
    args = compare.parse_args(["--shapes", "200x1x32x64,7x1x2x3", "--dtype", dtype])
    work = [(np.dtype(d).name, s, c) for d, s, c in compare_shapes.work_list(args)]
    assert work == [(d, s, c) for d, s in expected for c in ("rnn", "gru", "lstm")]
    args = compare.parse_args(["--shapes", "7x1x2x3", "--dtype", dtype, "--cells", "gru"])
    assert [c for _, _, c in compare_shapes.work_list(args)] == ["gru"] * (1 + (dtype == "default"))


def test_quick_work_list_has_float64_and_the_gated_cells_on_their_subsets_only():
    args = compare.parse_args(["--quick"])
    work = compare_shapes.work_list(args)
    f64 = list(dict.fromkeys(s for d, s, _ in work if d == np.float64))
    assert f64 == [s for s in args.shapes if s in compare_shapes.QUICK_FLOAT64_SUBSET]
    assert f64 and len(f64) < len(args.shapes)
    for cell in ("gru", "lstm"):
        shapes = {s for _, s, c in work if c == cell}
        assert shapes == set(compare_shapes.QUICK_GATED)
    assert {s for _, s, c in work if c == "rnn"} == set(args.shapes)


def test_gated_problems_and_their_flops():
    """torch's module for the cell, its weights G*H rows tall, the FLOPs G x the Elman cell's."""
    shape = (5, 3, 4, 6)
    elman = compare_shapes.forward_flops(compare_shapes.make_problem(shape, np.float32))
    for cell, gates in (("gru", 3), ("lstm", 4)):
        p = compare_shapes.make_problem(shape, np.float32, cell=cell)
        assert type(p.module).__name__ == cell.upper() and p.cell.gates == gates
        assert p.w_ih.shape == (gates * 6, 4) and p.w_hh.shape == (gates * 6, 6)
        assert p.b_ih.shape == p.b_hh.shape == (gates * 6,) and p.dy.shape == (5, 3, 6)
        assert compare_shapes.forward_flops(p) == gates * elman
        assert compare_shapes.mode_flops(p, "train") == 3 * gates * elman


def test_onnx_gate_orders():
    """PyTorch's gate blocks in ONNX's order: GRU r, z, n -> z, r, h; LSTM i, f, g, o ->
    i, o, f, c."""
    for cell, order in (("rnn", "a"), ("gru", "bac"), ("lstm", "adbc")):
        p = compare_shapes.make_problem((2, 1, 2, 2), np.float32, cell=cell)
        blocks = np.repeat(np.arange(p.cell.gates), 2)  # block k's rows hold k
        got = compare_onnx.onnx_order(p, blocks)[::2]
        assert "".join("abcd"[k] for k in got) == order


def agreed(p, runners):
    """Each mode's named results of every library that has it, checked against each other."""
    out = {}
    for mode in compare_shapes.MODES:
        named = {
            lib: to_named(run())
            for lib, r in runners.items()
            if mode in r
            for run, to_named in [r[mode]]
        }
        worst = compare_measure.check_agreement(p, mode, named)
        assert worst and max(worst.values()) <= compare_measure.TOL[p.dtype]
        out[mode] = named
    return out


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("shape", [(5, 3, 4, 6), (1, 2, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_peers_agree_on_a_tiny_problem(dtype, shape, cell):
    """Every library but JAX (its own test below), the unfused BLAS anchor included, gives the
    same outputs and gradients (T = 1 has no recurrent product at all)."""
    p = compare_shapes.make_problem(shape, dtype, cell=cell)
    notes = []
    with _common.thread_count(1):
        runners = compare_peers.all_runners(p, 1, notes)
        named = agreed(p, runners)
    assert next(iter(runners)) == "rnnfast" and {"torch", "numpy", "blas"} <= runners.keys()
    assert ("ort" in runners) or any(n.startswith("ORT skipped") for n in notes)
    assert ("openvino" in runners) or any(n.startswith("OpenVINO skipped") for n in notes)
    assert ("openvino" in runners) == (compare_onnx.openvino is not None and p.dtype == np.float32)
    assert "jax" not in runners
    states = {"h_n", "c_n"} if cell == "lstm" else {"h_n"}
    assert named["fwd_seq"]["rnnfast"].keys() == {"y", *states}
    assert named["fwd_last"]["torch"].keys() == states
    grads = {"dx", "dh0", "dweight_ih", "dweight_hh", "dbias_ih", "dbias_hh"}
    assert named["train"]["rnnfast"].keys() == grads | ({"dc0"} if cell == "lstm" else set())
    assert ("train" in runners["blas"]) == (cell == "rnn")  # the gated anchor: forward only


def test_missing_optional_peers_are_skipped_with_a_note(monkeypatch):
    monkeypatch.setattr(compare_onnx, "openvino", None)
    jax = compare_jax.JaxPeer()
    jax.version = None  # as where jax is not installed
    p = compare_shapes.make_problem((3, 2, 3, 4), np.float32, cell="gru")
    notes = []
    runners = compare_peers.all_runners(p, 1, notes, jax, skip=("blas",))
    assert list(runners) == ["rnnfast", "torch", "ort", "numpy"]
    assert notes == [
        "OpenVINO skipped: the openvino package is not installed",
        "JAX skipped: the jax package is not installed",
    ]
    assert jax.workers == {} and jax.note() is None


def test_jax_peer_agrees_and_times_itself():
    """JAX, in its pinned child process, on every cell in float32 and on the LSTM in float64:
    the same results as the others, and a timing from the child in _common.timing's form."""
    pytest.importorskip("jax")
    with compare_jax.JaxPeer() as jax:
        cases = [(np.float32, c) for c in ("rnn", "gru", "lstm")] + [(np.float64, "lstm")]
        for dtype, cell in cases:
            p = compare_shapes.make_problem((4, 2, 3, 5), dtype, cell=cell)
            runners = compare_peers.all_runners(p, 1, [], jax, skip=("ort", "openvino", "blas"))
            named = agreed(p, runners)
            assert named["train"]["jax"].keys() == named["train"]["rnnfast"].keys()
        t = runners["jax"]["fwd_seq"][0].timed(2, 0.0001, 0.001)
        assert t["median_s"] > 0 and len(t["samples_s"]) == 2 and t["inner"] >= 1
        assert list(jax.workers) == [1] and jax.workers[1].cores == compare_jax.cores_for(1)
        assert "pinned with os.sched_setaffinity before jax was imported" in jax.note()
        worker = jax.workers[1]
    assert worker.proc.poll() == 0  # stopped by the context manager


def test_disagreement_aborts():
    p = compare_shapes.make_problem((2, 1, 2, 2), np.float32)
    named = {"a": {"y": np.ones(3)}, "b": {"y": 2 * np.ones(3)}, "c": {"y": np.ones(4)}}
    with pytest.raises(SystemExit, match=r"DISAGREEMENT: float32 rnn 2x1x2x2 mode train"):
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
    monkeypatch.setattr(_timing, "WARMUP_S", 0.001)
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
    cell="rnn",
):
    """A result row whose libraries run at the given fractions of the roofline (so that
    speed-up = rnnfast's fraction / the peer's), and rnnfast per ISA at the given seconds."""
    p = compare_shapes.make_problem(shape, dtype, cell=cell)
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


@pytest.mark.parametrize(
    "H, mode, mine, peers, met, goal, capped",
    [
        # H <= 256, forward: 1.5x the fastest of torch / ort / openvino / jax (here ort)
        (128, "fwd_seq", 0.61, {"torch": 0.2, "ort": 0.4, "jax": 0.1}, True, 1.5, False),
        (128, "fwd_last", 0.59, {"torch": 0.2, "ort": 0.4, "openvino": 0.3}, False, 1.5, False),
        # 1.5x ort would be 0.9 of the roofline, beyond 85%: 85% meets it
        (256, "fwd_seq", 0.86, {"torch": 0.2, "ort": 0.6}, True, 1.5, True),
        (256, "fwd_seq", 0.84, {"torch": 0.2, "ort": 0.6}, False, 1.5, True),
        # training: torch and JAX only (an ORT time would not count); cap 80%
        (128, "train", 0.61, {"torch": 0.3, "jax": 0.4, "ort": 0.9}, True, 1.5, False),
        (128, "train", 0.81, {"torch": 0.3, "jax": 0.55}, True, 1.5, True),
        # H > 256: 1.25x, capped at 90% (forward) and 85% (training)
        (512, "fwd_seq", 0.76, {"torch": 0.6, "openvino": 0.5}, True, 1.25, False),
        (1024, "fwd_seq", 0.89, {"torch": 0.75}, False, 1.25, True),
        (300, "train", 0.86, {"torch": 0.7}, True, 1.25, True),
    ],
)
def test_gated_targets(H, mode, mine, peers, met, goal, capped):
    r = row_at((10, 8, 4, H), mode, fractions={"rnnfast": mine, **peers}, cell="gru")
    (c,) = compare_targets.gated_targets([r])
    considered = ("torch", "jax") if mode == "train" else ("torch", "ort", "openvino", "jax")
    fastest = max((p for p in peers if p in considered), key=peers.get)
    assert c["peer"] == fastest and c["goal"] == goal and c["cell"] == "gru"
    assert c["figure"] == pytest.approx(mine / peers[fastest])
    assert (c["met"], "meets it" in c["detail"]) == (met, capped)
    assert c["target"].startswith(f"gru float32 {'H <= 256' if H <= 256 else 'H > 256'}: ")


def test_gated_rows_get_only_the_gated_and_shared_targets():
    """The Elman targets judge the Elman rows only; the gated ones judge float32 gated rows."""
    fractions = {"rnnfast": 0.5, "torch": 0.1, "ort": 0.1, "numpy": 0.1}
    rows = [
        row_at((10, 8, 4, 64), mode, dtype, threads, fractions, cell=cell)
        for cell in ("rnn", "gru")
        for dtype in (np.float32, np.float64)
        for mode in ("fwd_seq", "train")
        for threads in (1, 2)
    ]
    checks = compare_targets.evaluate_targets(rows)
    for c in checks:
        if c["cell"] == "gru":
            assert c["target"].startswith("gru ")
            assert c["dtype"] == "float32" or "2 threads" in c["target"]
        else:
            assert not c["target"].startswith("gru ")
    gated = [c for c in checks if c["cell"] == "gru" and "fastest" in c["target"]]
    assert len(gated) == 4  # float32 x 2 modes x 2 thread counts
    scaling = [c for c in checks if c["target"].startswith("gru float64 2 threads never")]
    assert len(scaling) == 2


def test_cost_targets():
    """A gated training step against the Elman step of the same shape: GRU <= 3x, LSTM <= 4x."""
    elman = row_at((10, 8, 4, 64), "train", fractions={"rnnfast": 0.5})
    gru = row_at((10, 8, 4, 64), "train", fractions={"rnnfast": 0.6}, cell="gru")
    lstm = row_at((10, 8, 4, 64), "train", fractions={"rnnfast": 0.4}, cell="lstm")
    alone = row_at((10, 8, 4, 32), "train", fractions={"rnnfast": 0.5}, cell="gru")
    # 3x / 4x the FLOPs (and W_hh bytes): at the same roofline share, 3x / 4x the time
    checks = compare_targets.cost_targets([elman, gru, lstm, alone])
    assert [(c["cell"], c["goal"], round(c["figure"], 6), c["met"]) for c in checks] == [
        ("gru", 3.0, 2.5, True),
        ("lstm", 4.0, 5.0, False),
    ]
    lstm["libs"]["rnnfast"]["median_ms"] *= 0.7
    (c,) = compare_targets.cost_targets([elman, lstm])
    assert c["met"] and c["at_most"] and c["figure"] == pytest.approx(3.5)


def made_up_rows(threads=(1, 2), cell="rnn"):
    """Result rows of the streaming shape with fixed timings: rnnfast 1 ms, the peers slower
    (torch 2 ms, ort 3 ms, ...; training without ORT and OpenVINO)."""
    p = compare_shapes.make_problem(compare_shapes.STREAMING_SHAPE, np.float32, cell=cell)
    rows = []
    for n in threads:
        for mode in compare_shapes.MODES:
            libs = [
                lib
                for lib in compare_peers.LIBS
                if mode != "train" or lib not in ("ort", "openvino")
            ]
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
    assert row["cell"] == "rnn"
    assert row["speedup"] == pytest.approx(
        {"torch": 2.0, "ort": 3.0, "openvino": 4.0, "jax": 5.0, "numpy": 6.0, "blas": 7.0}
    )
    assert row["isa_ratio"] == pytest.approx({"avx2": 1.5})
    assert "ort" not in rows[2]["speedup"] and "openvino" not in rows[2]["speedup"]  # train
    t = by_target(compare_targets.evaluate_targets(rows))
    streaming = "float32 streaming 200x1x32x64: forward <= 0.25 us per step (avx512)"
    assert all(not c["met"] for c in t[streaming])  # 1 ms / 200 steps = 5 us
    assert all(c["met"] for c in t["float32 2 threads never slower than 1"])
    assert all(c["met"] for c in t["float32 H <= 128: >= 3x torch"]) is False  # 2x torch


def test_report(capsys):
    rows = made_up_rows() + made_up_rows(cell="lstm")
    roofs = {("float32", n): dict(ROOF, threads=n) for n in (1, 2)}
    targets = compare_targets.evaluate_targets(rows)
    compare_report.print_report(rows, roofs, targets, ["a note"])
    out = capsys.readouterr().out.splitlines()
    head = [line for line in out if line.startswith("cell shape TxBxDxH")]
    assert len(head) == 2
    assert (
        head[0].split()
        == (
            "cell shape TxBxDxH mode rnnfast ms GFLOP/s roof% torch ms x ort ms x openvino ms x "
            "jax ms x numpy ms x blas ms x avx2 x busy"
        ).split()
    )
    text = "\n".join(out)
    assert re.search(r"^rnn +200x1x32x64 +train +1\.000 .* 1\.50 +0\.0$", text, re.M)
    assert re.search(r"^lstm +200x1x32x64 +fwd_seq +1\.000 ", text, re.M)
    # the lstm rows: rnnfast 2x torch (the fastest) where 1.5x is asked; training 2x torch
    assert re.search(
        r"^  \[ {3}MET\] lstm float32 H <= 256: forward >= 1\.5x the fastest of torch, ort, "
        r"openvino, jax \(capped at 85% of the roofline\) \(threads=1\): 2/2 rows; worst "
        r"2\.00x \(goal 1\.5x\) at 200x1x32x64 fwd_seq vs torch$",
        text,
        re.M,
    )
    # the same times as the Elman cell's: 1x its training step, at most 4x asked
    assert "lstm float32 training step <= 4x the Elman step (time ratio) (threads=2): 1/1" in text
    # a table without a peer has no column for it
    compare_report.print_table([r for r in rows if r["mode"] == "train"])
    assert "ort ms" not in capsys.readouterr().out
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
    """A whole run on one tiny shape in every cell, on every ISA, the roofline and the warm-up
    cut short, and the garbage collection between libraries (a third of a second each) left
    out; JAX left out (its own test above), so that no child process starts."""
    monkeypatch.setattr(compare, "reexec_without_blas_overrides", lambda: None)
    monkeypatch.setattr(_timing, "gc", types.SimpleNamespace(collect=lambda: 0))
    monkeypatch.setattr(compare, "measure_roofline", lambda d, n, r: dict(ROOF, dtype=d, threads=n))
    out = tmp_path / "c.json"
    isas = rnnfast._core.supported_isas()
    argv = ["--shapes", "4x2x3x5", "--threads", "1", "--repeats", "1", "--min-repeat-ms", "0.1"]
    argv += ["--warmup-ms", "1", "--skip", "jax"]
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
        "cells",
        "skip",
        "repeats",
        "threads",
        "shapes",
        "extra",
        "dtype",
        "isas",
        "min_repeat_ms",
        "warmup_ms",
        "no_quantized",
        "no_plot",
        "min_repeat_s",
        "warmup_s",
        "gated_shapes",
    ]
    assert doc["args"]["cells"] == ["rnn", "gru", "lstm"] and doc["args"]["skip"] == ["jax"]
    machine = doc["machine"]
    assert machine["cpu"] == _common.cpu_model()
    assert machine["rnnfast_isa"] == rnnfast._core.active_isa()
    assert sorted(machine["rnnfast_isas_timed"]) == (sorted(isas) if len(isas) > 1 else [])
    assert machine["numpy_blas"] and "CPU capability" in machine["torch_blas"]
    assert [(r["dtype"], r["cell"], r["label"], r["mode"]) for r in doc["results"]] == [
        (d, c, "4x2x3x5", m)
        for d in ("float32", "float64")
        for c in ("rnn", "gru", "lstm")
        for m in compare_shapes.MODES
    ]
    assert "left out by --skip: jax" in doc["notes"]
    for r in doc["results"]:
        assert ("blas" in r["speedup"]) == (r["cell"] == "rnn" or r["mode"] != "train")
        assert "jax" not in r["libs"] and not r["grid"]
        assert ("openvino" in r["libs"]) == (
            compare_onnx.openvino is not None and r["dtype"] == "float32" and r["mode"] != "train"
        )
        if len(isas) > 1:
            assert set(r["isas"]) == set(isas)
            assert r["libs"]["rnnfast"]["samples_ms"] == r["isas"][r["active_isa"]]["samples_ms"]
    agreed = doc["agreement"][0]["max_relative_error"]["train"]
    assert agreed.keys() >= {"dx", "dweight_hh", "dh0"}
    lstm = doc["agreement"][2]
    assert lstm["cell"] == "lstm" and lstm["max_relative_error"]["train"].keys() >= {"dc0"}
    assert {t["cell"] for t in doc["targets"]} == {"rnn", "gru", "lstm"}
    assert any(t["target"].startswith("gru float32 H <= 256: forward") for t in doc["targets"])
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


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="Linux only")
def test_pinned_to_pins_every_thread_and_restores():
    """The compare pins the whole process (torch's pool and the threads started inside too) to
    the row's cores, so every peer runs where rnnfast does; the old masks come back after."""
    import os
    import threading

    import torch

    torch.set_num_threads(2)
    torch.ones(64, 64) @ torch.ones(64, 64)  # torch's pool threads exist now
    before = {tid: os.sched_getaffinity(tid) for tid in _common.process_threads()}
    one = _common.cores_for(1)
    seen = []
    with _common.pinned_to(one):
        inside = {tid: os.sched_getaffinity(tid) for tid in _common.process_threads()}
        worker = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
        worker.start()
        worker.join()
    assert all(mask == set(one) for mask in inside.values())
    assert seen == [set(one)]
    after = {tid: os.sched_getaffinity(tid) for tid in _common.process_threads() if tid in before}
    assert after == {tid: before[tid] for tid in after}
