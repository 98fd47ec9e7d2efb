"""bench/kernels/bf16_training.py (python -m bench.kernels.bf16_training): a run of main() on
the tiniest settings (one tiny shape, one repeat, a small roofline), checked for its structure:
a row per cell, mode and thread count with every library, every ratio, the bound and the
correctness guard, in the JSON; the guard flagging a row; the refusal to run without bf16
products unless --emulate; the command line's refusals. Nothing here is a timed assertion.

Where the CPU has no bf16 products the runs take --emulate (the software rounding), so that
the file runs on any machine."""

from __future__ import annotations

import json

import pytest

for name in ("onnx", "onnxruntime", "psutil", "torch", "threadpoolctl"):
    pytest.importorskip(name)

from bench import _timing
from bench.kernels import bf16_training as bench
from bench.peers.compare import onnx_peers
from bench.peers.compare import roofline as compare_roofline
from rnnfast import _core

TINY = [
    "--shapes", "3x2x5x16", "--repeats", "1", "--min-repeat-s", "0", "--warmup-s", "0",
    "--roofline-repeats", "1", "--emulate",
]  # fmt: skip
ROW_FIELDS = {
    "mode", "cell", "label", "shape", "threads", "flops", "roofline_ms", "libs", "ratios",
    "guard", "peer_errors", "bf16_paths", "others_cpus",
}  # fmt: skip
LIB_FIELDS = {
    "precision", "median_ms", "samples_ms", "calls_per_repeat", "gflops", "roofline",
    "roofline_fraction",
}  # fmt: skip
GUARD_FIELDS = {
    "limit", "versus", "metric", "errors", "max_error", "bf16_applied", "float32_agreement",
    "flagged", "reasons",
}  # fmt: skip
TARGET_FIELDS = {"target", "row", "ratio", "figure", "goal", "met"}


@pytest.fixture(autouse=True)
def small_roofline(monkeypatch):
    """A 64^3 matmul and no warm-ups: the roofline's figures are not what is tested."""
    monkeypatch.setattr(compare_roofline, "MATMUL_N", 64)
    monkeypatch.setattr(_timing, "WARMUP_S", 0.001)


def run(tmp_path, *extra):
    out = tmp_path / "bf16.json"
    doc = bench.main([*TINY, "--json", str(out), *extra])
    saved = json.loads(out.read_text())
    assert saved == json.loads(json.dumps(doc))
    return saved


def test_tiny_run_has_every_row_ratio_and_guard(tmp_path, capsys):
    emulation_before = _core.bf16_emulation()
    doc = run(tmp_path, "--threads", "1,2")
    printed = capsys.readouterr().out
    assert _core.bf16_emulation() == emulation_before  # --emulate undone after the run
    machine = doc["machine"]
    paths = machine["bf16_paths_timed"]
    assert paths[0] == machine["bf16_products_path"] and paths[0] in (
        "amx",
        "avx512_bf16",
        "emulated",
    )
    for key in ("cpu", "cpu_flags", "rnnfast_isa", "torch", "torch_mkldnn_available"):
        assert key in machine
    assert {r["threads"] for r in doc["roofline"]} == {1, 2}
    for roof in doc["roofline"]:
        assert roof["bf16"]["matmul_gflops"] == pytest.approx(
            bench.BF16_PEAK_FACTOR * roof["float32"]["matmul_gflops"]
        )
        assert "assumption" in roof["bf16"]
    ov = onnx_peers.openvino is not None
    rows = doc["rows"]
    keys = [(r["mode"], r["cell"], r["threads"]) for r in rows]
    assert sorted(keys) == sorted(
        (m, c, n) for m in bench.MODES for c in ("rnn", "gru", "lstm") for n in (1, 2)
    )
    for r in rows:
        assert ROW_FIELDS <= set(r)
        assert r["label"] == "3x2x5x16" and r["flops"] > 0
        assert set(r["roofline_ms"]) == {"float32", "bf16", "bf16_measured"}
        expected = [lib for lib in bench.LIBS[r["mode"]] if ov or "openvino" not in lib]
        expected += [bench.path_lib(p) for p in paths[1:]]
        assert set(r["libs"]) == set(expected)
        for lib, figures in r["libs"].items():
            assert set(figures) == LIB_FIELDS
            assert figures["precision"] == bench.lib_precision(lib)
            assert figures["median_ms"] > 0 and len(figures["samples_ms"]) == 1
            assert figures["roofline"] in r["roofline_ms"]
        # every ratio, each a number where both sides ran
        names = [name for name, _, _ in bench.RATIOS[r["mode"]]]
        names += [name for name, _, _ in bench.path_ratios(r["mode"], paths[1:])]
        assert set(r["ratios"]) == set(names)
        for name, a, b in bench.RATIOS[r["mode"]] + bench.path_ratios(r["mode"], paths[1:]):
            if a in r["libs"] and b in r["libs"]:
                assert r["ratios"][name] == pytest.approx(
                    r["libs"][a]["median_ms"] / r["libs"][b]["median_ms"]
                )
            else:
                assert r["ratios"][name] is None
        # the correctness guard: every rnnfast bf16 variant against float32, all outputs
        g = r["guard"]
        assert set(g) == GUARD_FIELDS and g["limit"] == bench.GUARD_LIMIT
        variants = {lib for lib in r["libs"] if bench.guarded(lib)}
        assert set(g["errors"]) == set(g["max_error"]) == variants
        assert "rnnfast_quantized_bf16" in variants or r["mode"] == "train"
        for v in variants:
            outputs = set(g["errors"][v])
            assert "y" in outputs if r["mode"] == "infer" else {"dx", "dweight_hh"} <= outputs
            assert 0 < g["max_error"][v] < bench.GUARD_LIMIT and g["bf16_applied"][v]
        assert not g["flagged"] and g["reasons"] == []
        peers = {"train": "torch_autocast_bf16", "infer": "openvino_bf16"}[r["mode"]]
        assert (peers in r["peer_errors"]) == (peers in r["libs"])
    assert doc["flagged"] == []
    for t in doc["targets"]:
        assert set(t) == TARGET_FIELDS and isinstance(t["met"], bool)
    if machine["bf16_emulated"]:
        assert doc["targets"] == [] and "EMULATED" in printed
    else:
        assert {t["ratio"] for t in doc["targets"]} >= {"bf16_vs_torch_autocast"}
    assert "correctness guard: 12 of 12 rows ok" in printed


def test_guard_flags_a_row_above_its_limit(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "GUARD_LIMIT", 1e-9)
    doc = run(tmp_path, "--cells", "gru", "--modes", "train", "--threads", "1", "--skip", "torch")
    assert [f["cell"] for f in doc["flagged"]] == ["gru"]
    (row,) = doc["rows"]
    assert row["guard"]["flagged"] and "rnnfast_bf16: relative error" in row["guard"]["reasons"][0]
    assert set(row["libs"]) >= {"rnnfast_f32", "rnnfast_bf16"} and "torch_f32" not in row["libs"]
    assert "FLAGGED train gru 3x2x5x16 1t" in capsys.readouterr().out


def test_no_bf16_products_needs_emulate(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "bf16_available", lambda: False)  # as on a CPU without
    args = [a for a in TINY if a != "--emulate"]
    with pytest.raises(SystemExit, match="no bf16 products.*--emulate"):
        bench.main([*args, "--json", str(tmp_path / "x.json")])
    assert not (tmp_path / "x.json").exists()
    before = _core.bf16_emulation()
    doc = run(tmp_path, "--cells", "rnn", "--modes", "infer", "--threads", "1")
    assert _core.bf16_emulation() == before
    assert doc["machine"]["bf16_products_path"] == "emulated" and doc["machine"]["bf16_emulated"]
    assert doc["machine"]["bf16_paths_timed"] == ["emulated"] and doc["targets"] == []
    assert "EMULATED" in capsys.readouterr().out


def test_command_line_refusals(capsys):
    for bad in (["--modes", "train,eval"], ["--skip", "jax"], ["--cells", "rnn,tcn"],
                ["--shapes", "1x2x3"], ["--threads", "0"]):  # fmt: skip
        with pytest.raises(SystemExit):
            bench.parse_args(bad)
    quick = bench.parse_args(["--quick"])
    assert quick.shapes == bench.QUICK_SHAPES and quick.repeats == 3
    full = bench.parse_args([])
    assert (
        full.shapes == bench.SHAPES
        and full.threads == [1, 2]
        and full.cells
        == [
            "rnn",
            "gru",
            "lstm",
        ]
    )
    with pytest.raises(SystemExit, match="--bf16-paths"):
        bench.other_paths("sse2", "avx512_bf16")
