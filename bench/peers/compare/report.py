"""compare's report: the header (versions, CPU model, rnnfast's ISA, both BLAS libraries), the
rooflines, the tables (a row per cell, shape and mode; a column per peer that ran, the blas anchor
included, and per other ISA), the targets, the JSON document and the chart."""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

import rnnfast
from bench._common import REEXEC_MARKER, cpu_model, numpy_blas_summary, torch_blas
from bench.peers.compare.jax_peer import jax_version
from bench.peers.compare.measure import TOL, isas_to_time
from bench.peers.compare.onnx_peers import openvino_version
from bench.peers.compare.runners import PEERS
from bench.peers.compare.shapes import MODES

# ----------------------------------------------------------------------------- printed


def print_header(args) -> None:
    """The versions, the CPU, the ISA that runs and the ISAs timed beside it, both BLAS libraries,
    the repeats; a re-execution; too many threads."""
    core = rnnfast._core
    print(
        f"rnnfast {rnnfast.__version__}, torch {torch.__version__}, onnxruntime {ort.__version__}, "
        f"openvino {openvino_version() or 'not installed'}, "
        f"jax {jax_version() or 'not installed'}, numpy {np.__version__}; "
        f"cells {','.join(args.cells)}; repeats={args.repeats}"
    )
    print(f"cpu: {cpu_model()}; {os.cpu_count()} logical CPUs")
    others = [i for i in args.isas if i != core.active_isa()]
    print(
        f"rnnfast isa: {core.active_isa()} (this cpu runs {', '.join(core.supported_isas())}; "
        f"also timed: {', '.join(others) or 'none'})"
        + (f"; note: {core.isa_note()}" if core.isa_note() else "")
    )
    print(f"numpy BLAS: {numpy_blas_summary()}")
    print(f"torch BLAS: {torch_blas()}")
    if os.environ.get(REEXEC_MARKER):
        print(f"re-executed without {os.environ[REEXEC_MARKER]}")
    if max(args.threads) > (os.cpu_count() or 1):
        print(f"warning: more threads than the {os.cpu_count()} logical CPUs")


def print_roofline(roof: dict) -> None:
    """Both libraries' matmul rate and matvec bandwidth, and which one the roofline takes."""
    mm = ", ".join(f"{k} {v:.1f}" for k, v in roof["matmul_gflops_by_lib"].items())
    mv = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in roof["matvec_bytes_per_s_by_lib"].items())
    print(
        f"roofline {roof['dtype']} threads={roof['threads']}: "
        f"matmul {roof['matmul_n']}^3 GFLOP/s {mm} -> {roof['matmul_from']}; "
        f"matvec {roof['matvec_shape'][0]}x{roof['matvec_shape'][1]} GB/s {mv} "
        f"-> {roof['matvec_from']}"
    )


def fmt(value, spec, missing="-", wide=None):
    """value in spec, or in '.0f' from `wide` up (so that a column keeps its width)."""
    if value is None:
        return missing
    return format(value, ".0f" if wide is not None and value >= wide else spec)


def print_table(rows: list) -> None:
    """One line per row: rnnfast's time, GFLOP/s and roofline share, each peer's time and
    speed-up (the peers that ran on some row), each other ISA's time / the active one's, the
    others' CPU use."""
    isas = list(dict.fromkeys(i for r in rows for i in r.get("isa_ratio", {})))
    peers = [p for p in PEERS if any(p in r["libs"] for r in rows)]
    head = (
        f"{'cell':<5}{'shape TxBxDxH':<18}{'mode':<9}{'rnnfast ms':>11}{'GFLOP/s':>9}{'roof%':>7}"
        + "".join(f"{p + ' ms':>{max(10, len(p) + 4)}}{'x':>7}" for p in peers)
        + "".join(f"{i + ' x':>9}" for i in isas)
        + f"{'busy':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        me = r["libs"]["rnnfast"]
        times = "".join(
            f"{fmt(r['libs'].get(p, {}).get('median_ms'), '.3f', wide=1e4):>{max(10, len(p) + 4)}}"
            f"{fmt(r['speedup'].get(p), '.2f', wide=1e3):>7}"
            for p in peers
        )
        per_isa = "".join(f"{fmt(r['isa_ratio'].get(i), '.2f', wide=1e3):>9}" for i in isas)
        name = r["label"] + ("" if r.get("grid", True) else " *")
        print(
            f"{r.get('cell', 'rnn'):<5}{name:<18}{r['mode']:<9}{me['median_ms']:>11.3f}"
            f"{me['gflops']:>9.2f}{100 * me['roofline_fraction']:>6.0f}%"
            + times
            + per_isa
            + f"{r['others_cpus']:>6.1f}"
        )


def print_report(rows: list, roofs: dict, targets: list, notes: list) -> None:
    """One table per (dtype, threads) under its roofline, then the targets and the notes."""
    for (dtype, threads), roof in roofs.items():
        group = [r for r in rows if r["dtype"] == dtype and r["threads"] == threads]
        if not group:
            continue
        print()
        print_roofline(roof)
        print(
            "times: median ms per call; x = peer time / rnnfast time; roof% = roofline time / "
            "rnnfast time; numpy = rnnfast.reference; blas = unfused GEMMs in torch.matmul; "
            "every library on the row's threads' cores (this process pinned to them with "
            "os.sched_setaffinity, every thread of it; jax in its own process pinned the same); "
            "<isa> x = rnnfast's time on that ISA / on the active one; * = off issue 3's grid; "
            "busy = CPUs other processes used; GRU / LSTM FLOPs = 3x / 4x the Elman cell's"
        )
        print_table(group)
    print()
    print_targets(targets)
    for note in notes:
        print(f"note: {note}")


def print_targets(targets: list) -> None:
    """One line per target and thread count: met or not, how many rows meet it, the worst row
    with its figure, then every miss with its figure."""
    print("targets (figure vs goal; reported, not asserted)")
    groups = {}
    for t in targets:
        groups.setdefault((t["target"], t["threads"]), []).append(t)
    for (name, threads), checks in groups.items():
        met = sum(c["met"] for c in checks)
        lower_is_better = checks[0].get("at_most", checks[0]["unit"] == "us")
        worst = (max if lower_is_better else min)(checks, key=lambda c: c["figure"])
        status = "MET" if met == len(checks) else "MISSED"
        print(
            f"  [{status:>6}] {name} (threads={threads}): {met}/{len(checks)} rows; "
            f"worst {worst['figure']:.2f}{worst['unit']} (goal {worst['goal']:g}{worst['unit']}) "
            f"at {worst['shape']} {worst['mode']}"
            + (f" vs {worst['peer']}" if worst.get("peer") else "")
        )
        for c in checks:
            if c["detail"] or not c["met"]:
                verdict = "met" if c["met"] else "missed"
                detail = f" ({c['detail']})" if c["detail"] else ""
                peer = f" vs {c['peer']}" if c.get("peer") else ""
                print(
                    f"           {verdict}: {c['shape']} {c['mode']} {c['figure']:.2f}{c['unit']}"
                    + peer
                    + detail
                )


# ----------------------------------------------------------------------------- written


def machine_info(args=None) -> dict:
    core = rnnfast._core
    return {
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "rnnfast": rnnfast.__version__,
        "rnnfast_isa": core.active_isa(),
        "rnnfast_isas_supported": core.supported_isas(),
        "rnnfast_isas_timed": isas_to_time(args.isas, core.active_isa()) if args else [],
        "rnnfast_isa_note": core.isa_note(),
        "numpy": np.__version__,
        "numpy_blas": numpy_blas_summary(),
        "torch": torch.__version__,
        "torch_blas": torch_blas(),
        "onnxruntime": ort.__version__,
        "onnx": onnx.__version__,
        "openvino": openvino_version(),
        "jax": jax_version(),
        "blas_overrides_removed": os.environ.get(REEXEC_MARKER),
    }


def write_json(path: Path, args, rows, roofs, agreement, targets, notes, quantized=()) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(args),
        "args": {k: v for k, v in vars(args).items() if k not in ("out", "plot")},
        "tolerance": {k.name: v for k, v in TOL.items()},
        "roofline": list(roofs.values()),
        "results": rows,
        "agreement": agreement,
        "targets": targets,
        "quantized": list(quantized),
        "notes": notes,
    }
    path.write_text(json.dumps(doc, indent=1, default=float))


def plot_speedups(path: Path, rows: list) -> None:
    """One panel per (dtype, threads) and mode: bars of peer_time / rnnfast_time per shape."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(r["dtype"], r["threads"]) for r in rows})
    panels = {}
    for r in rows:
        key = (r["dtype"], r["threads"], r["mode"])
        panels[key] = panels.get(key, 0) + 1
    width = max(5.0, 0.3 * max(panels.values()))  # bars of every cell and shape in one panel
    fig, axes = plt.subplots(
        len(groups), len(MODES), squeeze=False, figsize=(width * len(MODES), 3.2 * len(groups))
    )
    for gi, (dtype, threads) in enumerate(groups):
        for mi, mode in enumerate(MODES):
            sel = [
                r for r in rows if (r["dtype"], r["threads"], r["mode"]) == (dtype, threads, mode)
            ]
            speedup_panel(axes[gi][mi], sel, f"{mode}, {dtype}, {threads} thread(s)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def speedup_panel(ax, sel: list, title: str) -> None:
    """Bars of each peer's speed-up per row of sel, on a log scale with 1x marked."""
    from matplotlib import ticker

    width = 0.8 / len(PEERS)
    for pi, peer in enumerate(PEERS):
        xs = [i + (pi - (len(PEERS) - 1) / 2) * width for i in range(len(sel))]
        ys = [r["speedup"].get(peer, np.nan) for r in sel]
        ax.bar(xs, ys, width, label=peer)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ticks = [f"{r.get('cell', 'rnn')} {r['label']}" for r in sel]
    ax.set_xticks(range(len(sel)), ticks, rotation=30, ha="right", fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel("speed-up of rnnfast (x)", fontsize=8)


def print_done(agreement_worst: float, out: Path, plot: Path | None) -> None:
    written = f"{out} and {plot}" if plot is not None else f"{out} (no chart: --no-plot)"
    print(
        f"all libraries agreed (largest relative difference {agreement_worst:.2g}); wrote {written}"
    )
