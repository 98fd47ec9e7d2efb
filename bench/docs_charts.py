"""The docs' charts, drawn from a committed JSON that a benchmark run wrote (issue 44).

Run from the repository root:

    python -m bench.docs_charts                   # every chart from its JSON (CHARTS below)
    python -m bench.docs_charts --check           # exit 1 if a chart is missing or stale

Each chart is a PNG under docs/charts/ with, beside it, an ``.inc`` file that its page includes
(a ``figure`` directive whose caption names the CPU, the ISA, the date and the command of the run).
The PNG carries its source in its metadata: ``rnnfast-source`` (the JSON's path, from the
repository root) and ``rnnfast-source-sha256`` (the SHA-256 of the JSON's bytes when it was drawn).

The freshness rule (tests/test_docs_charts.py): a chart is up to date when its source JSON exists
and hashes to the recorded SHA-256, i.e. it was drawn from that JSON as committed, so after it.
Hashes, not file times: a fresh clone gives every file the same mtime, and git keeps none.
To refresh a chart, rerun the benchmark with ``--out`` at the JSON's path, then this script.

Every chart uses STYLE, the one look the docs share.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHARTS_DIR = ROOT / "docs" / "charts"
COMPARE_JSON = CHARTS_DIR / "compare-quick.json"

# The run that wrote COMPARE_JSON, as its caption tells it.
COMPARE_COMMAND = (
    "python -m bench.peers.compare --quick --out docs/charts/compare-quick.json --no-plot"
)
COMPARE_NOTE = (
    "A --quick run (3 short repeats per row) on a 2-core VM with nothing else running: "
    "short repeats, so a row can move by several percent from run to run."
)

STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 110,
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": None,  # set in _style() (the tab10 colours, a fixed order)
}
PEER_ORDER = ("torch", "ort", "openvino", "jax", "numpy", "blas")
MODES = ("fwd_seq", "fwd_last", "train")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _style():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from cycler import cycler

    style = dict(STYLE)
    style["axes.prop_cycle"] = cycler(color=plt.get_cmap("tab10").colors)
    plt.rcParams.update(style)
    return plt


def _save(fig, name: str, source: Path) -> Path:
    out = CHARTS_DIR / f"{name}.png"
    meta = {
        "Software": "bench/docs_charts.py",
        "rnnfast-source": source.relative_to(ROOT).as_posix(),
        "rnnfast-source-sha256": sha256(source),
    }
    if not fig.get_layout_engine():
        fig.tight_layout()
    fig.savefig(out, metadata=meta)
    return out


def _caption(doc: dict, what: str, note: str, command: str) -> str:
    m = doc["machine"]
    cpu = m.get("cpu", "unknown CPU")
    isa = m.get("rnnfast_isa") or m.get("isa") or "?"
    return f"{what} CPU: {cpu}; rnnfast ISA: {isa}; run {doc['date'][:10]} (``{command}``). {note}"


def _write_inc(name: str, alt: str, caption: str) -> None:
    text = f".. figure:: /charts/{name}.png\n   :alt: {alt}\n   :width: 100%\n\n   {caption}\n"
    (CHARTS_DIR / f"{name}.inc").write_text(text)


def _log(ax, axis: str = "y") -> None:
    """A log scale with plain tick labels (0.5, 1, 2, 10), not powers of ten."""
    from matplotlib import ticker

    getattr(ax, f"set_{axis}scale")("log")
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(ticker.FormatStrFormatter("%g"))
    target.set_minor_formatter(ticker.NullFormatter())


def _shape(r: dict) -> str:
    s = r["shape"]
    return f"T{s['T']} B{s['B']} D{s['D']} H{s['H']}"


# ---- the charts --------------------------------------------------------------------------------


def performance(doc: dict, source: Path) -> None:
    """rnnfast against each peer per shape: a panel per cell and thread count (float32,
    forward returning every h_t), and a panel of the quantized rows per thread count."""
    plt = _style()
    rows = [r for r in doc["results"] if r["dtype"] == "float32" and r["mode"] == "fwd_seq"]
    cells = [c for c in ("rnn", "gru", "lstm") if any(r["cell"] == c for r in rows)]
    threads = sorted({r["threads"] for r in rows})
    quant = [q for q in doc.get("quantized", []) if q["mode"] == "fwd_seq"]
    ncols = len(threads)
    nrows = len(cells) + (1 if quant else 0)
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, figsize=(5.2 * ncols, 2.6 * nrows))
    peers = [p for p in PEER_ORDER if any(p in r["speedup"] for r in rows)]
    for ci, cell in enumerate(cells):
        for ti, t in enumerate(threads):
            ax = axes[ci][ti]
            sel = [r for r in rows if r["cell"] == cell and r["threads"] == t]
            width = 0.8 / len(peers)
            for pi, peer in enumerate(peers):
                xs = [i + (pi - (len(peers) - 1) / 2) * width for i in range(len(sel))]
                ys = [r["speedup"].get(peer, float("nan")) for r in sel]
                ax.bar(xs, ys, width, label=peer, color=f"C{PEER_ORDER.index(peer)}")
            ax.axhline(1.0, color="black", linewidth=0.8)
            _log(ax)
            ax.set_xticks(range(len(sel)), [_shape(r) for r in sel], rotation=20, ha="right")
            ax.set_title(f"{cell}, float32, forward (every h_t), {t} thread(s)")
            ax.set_ylabel("peer time / rnnfast time")
    if quant:
        formats = [k for k in ("bf16", "int8") if any(k in q["median_ms"] for q in quant)]
        for ti, t in enumerate(threads):
            ax = axes[-1][ti]
            sel = [q for q in quant if q["threads"] == t]
            labels = ["float32"] + formats
            width = 0.8 / len(labels)
            for li, lab in enumerate(labels):
                xs = [i + (li - (len(labels) - 1) / 2) * width for i in range(len(sel))]
                ys = [q["median_ms"].get(lab, float("nan")) for q in sel]
                ax.bar(xs, ys, width, label=f"rnnfast {lab}", color=("C9", "C6", "C8")[li])
            for peer, colour in (("torch", "C0"), ("ort", "C1")):
                # the peer's float32 time: a format's time x its speed-up over the peer
                ys = [
                    q["median_ms"][formats[0]] * q["speedup_over_peer"][peer][formats[0]]
                    if peer in q.get("speedup_over_peer", {})
                    else float("nan")
                    for q in sel
                ]
                ax.plot(
                    range(len(sel)),
                    ys,
                    "_",
                    color=colour,
                    markersize=18,
                    mew=2,
                    label=f"{peer} float32",
                )
            _log(ax)
            ax.set_xticks(range(len(sel)), [_shape(q) for q in sel], rotation=20, ha="right")
            ax.set_title(f"rnn, quantized rows, forward (every h_t), {t} thread(s)")
            ax.set_ylabel("time (ms, lower is faster)")
            ax.legend(loc="upper left")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), title="peer")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))
    _save(fig, "performance", source)
    plt.close(fig)
    _write_inc(
        "performance",
        "Bar charts of rnnfast's speed-up over each peer per shape, cell and thread count",
        _caption(
            doc,
            "rnnfast's speed-up over each peer (peer time / rnnfast time, above 1: rnnfast is "
            "faster; log scale), per cell, shape and thread count, float32; the last row: the "
            "quantized Elman rows' times against float32 rnnfast and torch.",
            COMPARE_NOTE,
            COMPARE_COMMAND,
        ),
    )


def choosing_a_cell(doc: dict, source: Path) -> None:
    """rnnfast's time per cell on the shapes every cell ran, per mode (1 thread, float32)."""
    plt = _style()
    rows = [r for r in doc["results"] if r["dtype"] == "float32" and r["threads"] == 1]
    cells = [c for c in ("rnn", "gru", "lstm") if any(r["cell"] == c for r in rows)]
    shapes = [
        lab
        for lab in dict.fromkeys(r["label"] for r in rows)
        if all(any(r["label"] == lab and r["cell"] == c for r in rows) for c in cells)
    ]
    fig, axes = plt.subplots(1, len(MODES), squeeze=False, figsize=(3.6 * len(MODES), 2.9))
    for mi, mode in enumerate(MODES):
        ax = axes[0][mi]
        width = 0.8 / len(cells)
        for ci, cell in enumerate(cells):
            ys = []
            for lab in shapes:
                hit = [r for r in rows if (r["label"], r["cell"], r["mode"]) == (lab, cell, mode)]
                ys.append(hit[0]["libs"]["rnnfast"]["median_ms"] if hit else float("nan"))
            xs = [i + (ci - (len(cells) - 1) / 2) * width for i in range(len(shapes))]
            ax.bar(xs, ys, width, label=cell)
        _log(ax)
        names = []
        for lab in shapes:
            r = next(r for r in rows if r["label"] == lab)
            names.append(_shape(r))
        ax.set_xticks(range(len(shapes)), names, rotation=15, ha="right")
        ax.set_title(f"{mode}, float32, 1 thread")
        ax.set_ylabel("rnnfast time (ms)")
    axes[0][0].legend(loc="upper left")
    _save(fig, "choosing_a_cell", source)
    plt.close(fig)
    _write_inc(
        "choosing_a_cell",
        "Bar charts of rnnfast's time per cell (Elman, GRU, LSTM) on the same shapes",
        _caption(
            doc,
            "What each cell costs in rnnfast on the same shapes: median time per call (log "
            "scale), forward returning every h_t, the last h_T only, and forward + backward.",
            COMPARE_NOTE,
            COMPARE_COMMAND,
        ),
    )


def quantization(doc: dict, source: Path) -> None:
    """Per format, relative error against float32 (accuracy) against speed-up over float32."""
    plt = _style()
    quant = doc.get("quantized", [])
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    markers = {1: "o", 2: "s"}
    for fi, fmt in enumerate(("bf16", "int8")):
        for t in sorted({q["threads"] for q in quant}):
            sel = [q for q in quant if q["threads"] == t and fmt in q["median_ms"]]
            if not sel:
                continue
            xs = [q["speedup_over_float32"][fmt] for q in sel]
            ys = [q["relative_error"][fmt] for q in sel]
            ax.scatter(
                xs,
                ys,
                color=f"C{fi}",
                marker=markers.get(t, "^"),
                label=f"{fmt}, {t} thread(s)",
            )
    ax.axvline(1.0, color="black", linewidth=0.8)
    _log(ax, "x")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("speed-up over float32 rnnfast (x, right is faster)")
    ax.set_ylabel("relative error against float32 (lower is closer)")
    ax.set_title("Elman forward: accuracy against speed per quantized format")
    ax.legend(loc="best")
    _save(fig, "quantization", source)
    plt.close(fig)
    _write_inc(
        "quantization",
        "Scatter plot of relative error against speed-up over float32, per quantized format",
        _caption(
            doc,
            "Each quantized format's relative error against float32 (||y_q - y|| / ||y||) "
            "against its speed-up over float32 rnnfast, per shape and mode (the Elman forward).",
            COMPARE_NOTE,
            COMPARE_COMMAND,
        ),
    )


def threads(doc: dict, source: Path) -> None:
    """Thread scaling: each library's 1-thread time / its 2-thread time, per cell and shape."""
    plt = _style()
    rows = [r for r in doc["results"] if r["dtype"] == "float32" and r["mode"] == "fwd_seq"]
    counts = sorted({r["threads"] for r in rows})
    libs = ["rnnfast"] + [p for p in PEER_ORDER if any(p in r["libs"] for r in rows)]
    keys = list(dict.fromkeys((r["cell"], r["label"]) for r in rows))
    fig, ax = plt.subplots(figsize=(8.0, 3.2))
    width = 0.8 / len(libs)
    for li, lib in enumerate(libs):
        ys = []
        for cell, lab in keys:
            by_t = {
                r["threads"]: r["libs"][lib]["median_ms"]
                for r in rows
                if (r["cell"], r["label"]) == (cell, lab) and lib in r["libs"]
            }
            ok = counts[0] in by_t and counts[-1] in by_t
            ys.append(by_t[counts[0]] / by_t[counts[-1]] if ok else float("nan"))
        xs = [i + (li - (len(libs) - 1) / 2) * width for i in range(len(keys))]
        color = "C9" if lib == "rnnfast" else f"C{PEER_ORDER.index(lib)}"
        ax.bar(xs, ys, width, label=lib, color=color)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(counts[-1] / counts[0], color="gray", linewidth=0.8, linestyle="--")
    names = []
    for cell, lab in keys:
        r = next(r for r in rows if (r["cell"], r["label"]) == (cell, lab))
        names.append(f"{cell} {_shape(r)}")
    ax.set_xticks(range(len(keys)), names, rotation=20, ha="right")
    ax.set_ylabel(f"time at {counts[0]} / time at {counts[-1]} threads")
    ax.set_title(
        f"Thread scaling, float32 forward (every h_t): above 1, {counts[-1]} threads are faster"
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _save(fig, "threads", source)
    plt.close(fig)
    _write_inc(
        "threads",
        "Bar chart of each library's speed-up from 1 to 2 threads per cell and shape",
        _caption(
            doc,
            f"Each library's {counts[0]}-thread time over its {counts[-1]}-thread time (dashed: "
            "perfect scaling) per cell and shape, float32, forward returning every h_t.",
            COMPARE_NOTE,
            COMPARE_COMMAND,
        ),
    )


CHARTS = {
    "performance": (COMPARE_JSON, performance),
    "choosing_a_cell": (COMPARE_JSON, choosing_a_cell),
    "quantization": (COMPARE_JSON, quantization),
    "threads": (COMPARE_JSON, threads),
}


def recorded(png: Path) -> dict:
    """The PNG's text metadata ({} where it has none)."""
    from PIL import Image

    with Image.open(png) as im:
        return dict(getattr(im, "text", {}) or {})


def stale() -> list[str]:
    """Why each chart is missing or out of date ([] when all are fresh)."""
    problems = []
    for name, (source, _) in CHARTS.items():
        png = CHARTS_DIR / f"{name}.png"
        if not source.is_file():
            problems.append(f"{name}: its source {source.relative_to(ROOT)} is missing")
            continue
        if not png.is_file() or not (CHARTS_DIR / f"{name}.inc").is_file():
            problems.append(f"{name}: docs/charts/{name}.png or .inc is missing")
            continue
        meta = recorded(png)
        if meta.get("rnnfast-source") != source.relative_to(ROOT).as_posix():
            problems.append(f"{name}: drawn from {meta.get('rnnfast-source')!r}, not {source}")
        elif meta.get("rnnfast-source-sha256") != sha256(source):
            problems.append(f"{name}: older than {source.relative_to(ROOT)} (its hash differs)")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check that every chart is fresh")
    ap.add_argument("--only", default=None, help="comma-separated chart names (default: all)")
    args = ap.parse_args(argv)
    if args.check:
        problems = stale()
        for p in problems:
            print(p)
        return 1 if problems else 0
    names = args.only.split(",") if args.only else list(CHARTS)
    for name in names:
        source, draw = CHARTS[name]
        draw(json.loads(source.read_text()), source)
        print(f"docs/charts/{name}.png and .inc from {source.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
