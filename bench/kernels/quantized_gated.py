"""Quantized GRU and LSTM measured (issue 24): ``functional.quantized_gated_forward`` with int8
and bf16 weights, on the automatic path and on each quantized path this CPU runs, beside
rnnfast's float32 forward, torch's float32 nn.GRU / nn.LSTM and torch's dynamic int8 copy of
them (``quantize_dynamic``: ONNX Runtime has no int8 GRU), side by side in one process.

    python -m bench.kernels.quantized_gated [--cells gru,lstm] [--cases "T,B,D,H;..."]
                                            [--threads N] [--repeats 7] [--min-repeat-s 0.2]
                                            [--warmup-s 0.25] [--out PATH]

One layer, one direction, x (T, B, D), zero initial states, both biases, every h_t returned
(return_sequences); PyTorch's initialisation (uniform in +-1/sqrt(H)) and gate order, the same
weights in every variant. Times are medians of repeats alternating between all the variants of
a case, torch's too (bench/_common.py); at more than one thread torch's idle OpenMP workers may
then spin into the next variant's time, which the rows share alike.

Per row: the time; speedup = rnnfast float32 time / the row's time (> 1: faster), float32 run
on the float ISA under which the row's path is the automatic choice (bench.kernels.quantized's
FLOAT_ISA_OF: what a user of that machine gains; torch's rows against the best ISA); vs torch
int8 = torch's dynamic int8 time / the row's time; the bytes of W_ih and W_hh as the kernels
read them (rnnfast's packed copies, torch's int8 data); ||y - y_float32|| / ||y_float32||
against rnnfast float32 on the best ISA, checked below rnnfast.quantize's ERROR_BOUND for every
rnnfast quantized variant before anything is timed. The issue's targets follow the table
(reported, never asserted). Writes JSON (default bench/results/quantized_gated.json).
"""

from __future__ import annotations

import argparse
import platform
import warnings
from pathlib import Path

import numpy as np
import torch
from torch.ao.quantization import quantize_dynamic

import rnnfast
from bench import RESULTS
from bench._common import (
    SHAPE_COLUMNS,
    WARMUP_S,
    cell,
    cpu_model,
    parse_cases,
    text_table,
    thread_count,
    time_alternating,
    torch_blas,
    write_json,
)
from bench.kernels.quantized import FLOAT_ISA_OF
from rnnfast import _core, functional
from rnnfast.nn.quantized.formats import MODES, QuantizedWeight
from rnnfast.quantize import ERROR_BOUND

# per cell: its gates, rnnfast's float32 forward, torch's layer
CELLS = {
    "gru": (3, functional.gru_forward, torch.nn.GRU),
    "lstm": (4, functional.lstm_forward, torch.nn.LSTM),
}

# (T, B, D, H): the B = 1, H = 1024 target, B = 64 at H = 1024, then small shapes (never
# slower than float32)
DEFAULT_CASES = (
    "100,1,1024,1024;50,64,1024,1024;100,1,32,64;100,16,64,128;50,8,256,256;20,4,16,32;"
    "50,64,128,256"
)


def parse_cells(text):
    """``"gru,lstm"`` as a list of CELLS' names (their order); anything else ends the script."""
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if not names or any(n not in CELLS for n in names):
        raise SystemExit(f"--cells: expected some of {', '.join(CELLS)}, got {text!r}")
    return [n for n in CELLS if n in names]


def problem(cell_name, case):
    """x and PyTorch-initialised weights of one layer: (x, w_ih, w_hh, b_ih, b_hh)."""
    T, B, D, H = case
    G = CELLS[cell_name][0]
    rng = np.random.default_rng(0)
    bound = 1.0 / np.sqrt(H)

    def uniform(*shape):
        return rng.uniform(-bound, bound, shape).astype(np.float32)

    x = rng.standard_normal((T, B, D)).astype(np.float32)
    return x, uniform(G * H, D), uniform(G * H, H), uniform(G * H), uniform(G * H)


def torch_layers(cell_name, weights):
    """torch's float32 layer holding ``weights`` (w_ih, w_hh, b_ih, b_hh) and its dynamic int8
    copy (torch.ao's quantize_dynamic, which swaps a model's children: the layer goes in a
    Sequential)."""
    w_ih, w_hh = weights[0], weights[1]
    layer_class = CELLS[cell_name][2]
    layer = layer_class(w_ih.shape[1], w_hh.shape[1]).eval()
    names = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
    with torch.no_grad():
        for name, value in zip(names, weights):
            getattr(layer, name).copy_(torch.from_numpy(value))
    with warnings.catch_warnings():  # torch.ao.quantization's and qint8's deprecation notices
        warnings.filterwarnings("ignore", ".*deprecated", DeprecationWarning)
        warnings.filterwarnings("ignore", ".*deprecated", UserWarning)
        dynamic = quantize_dynamic(torch.nn.Sequential(layer), {layer_class}, dtype=torch.qint8)
    return layer, dynamic[0]


def torch_int8_bytes(dynamic):
    """Bytes of the dynamic layer's int8 W_ih and W_hh (one scale per matrix besides)."""
    return sum(w.numel() * w.element_size() for w in dynamic.get_weight().values())


def float_isa_of(path, float_isas, top_isa):
    """The float ISA under which ``path`` is the automatic choice, where this CPU runs it."""
    isa = FLOAT_ISA_OF.get(path, top_isa)
    return isa if isa in float_isas else top_isa


def on(isa, path, fn):
    """fn called with rnnfast's float kernels of ``isa`` and the quantized ``path`` ('' =
    automatic): every rnnfast variant sets both, so that they can alternate."""

    def run():
        _core.set_active_isa(isa)
        _core.set_quantized_path(path)
        return fn()

    return run


def variants(cell_name, x, weights):
    """{(library, kind, path): (run, weight bytes)}, each run returning y (T, B, H) as NumPy."""
    G, float_forward, _ = CELLS[cell_name]
    w_ih, w_hh, b_ih, b_hh = weights
    top_isa = _core.active_isa()

    def float32():
        return float_forward(x, w_ih, w_hh, b_ih, b_hh, return_sequences=True).y

    out = {
        ("rnnfast", "float32", isa): (on(isa, "", float32), w_ih.nbytes + w_hh.nbytes)
        for isa in _core.supported_isas()
    }
    for kind in MODES:
        # rows in PyTorch's gate order, packed in the kernels' gate layout (G gate groups)
        wi, wh = (
            QuantizedWeight.from_float(kind, w).packed_rows(0, w.shape[0], G) for w in (w_ih, w_hh)
        )

        def fn(wi=wi, wh=wh):
            return functional.quantized_gated_forward(cell_name, x, wi, wh, b_ih, b_hh).y

        out[("rnnfast", kind, "auto")] = (on(top_isa, "", fn), wi.nbytes + wh.nbytes)
        for path in _core.quantized_paths(kind):
            isa = float_isa_of(path, _core.supported_isas(), top_isa)
            out[("rnnfast", kind, path)] = (on(isa, path, fn), wi.nbytes + wh.nbytes)
    layer, dynamic = torch_layers(cell_name, weights)
    xt = torch.from_numpy(x)

    def torch_run(model):
        def run():
            with torch.no_grad():
                return model(xt)[0].numpy()

        return run

    out[("torch", "float32", "-")] = (torch_run(layer), w_ih.nbytes + w_hh.nbytes)
    out[("torch", "int8", "dynamic")] = (torch_run(dynamic), torch_int8_bytes(dynamic))
    return out


def relative_errors(runs, top_isa, where):
    """||y - y_float32|| / ||y_float32|| of every variant against rnnfast float32 on the best
    ISA; a rnnfast quantized variant at or above rnnfast.quantize's ERROR_BOUND ends the
    script (its message naming ``where``, the cell and shape) before anything is timed."""
    ref = np.asarray(runs[("rnnfast", "float32", top_isa)](), dtype=np.float64)
    errors = {}
    for key, run in runs.items():
        y = np.asarray(run(), dtype=np.float64)
        errors[key] = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
        lib, kind, path = key
        if lib == "rnnfast" and kind in ERROR_BOUND and not errors[key] < ERROR_BOUND[kind]:
            raise SystemExit(
                f"QUANTIZED OUT OF BOUND: {where} {kind} on {path}: relative error {errors[key]:.3g} >= "
                f"{ERROR_BOUND[kind]:g}; nothing timed"
            )
    return errors


def case_rows(cell_name, case, threads, args):
    """The rows of one cell and case: every variant timed, alternating."""
    x, *weights = problem(cell_name, case)
    top_isa = _core.active_isa()
    float_isas = _core.supported_isas()
    found = variants(cell_name, x, weights)
    runs = {key: run for key, (run, _) in found.items()}
    try:
        errors = relative_errors(runs, top_isa, f"{cell_name} {','.join(map(str, case))}")
        times = time_alternating(runs, args.repeats, args.min_repeat_s, args.warmup_s)
    finally:
        _core.set_quantized_path("")
        _core.set_active_isa(top_isa)
    auto = {kind: _core.quantized_path(kind) for kind in MODES}
    torch_int8 = times[("torch", "int8", "dynamic")]["median_s"]
    rows = []
    for (lib, kind, path), t in times.items():
        if lib == "torch":
            versus = top_isa
        elif kind == "float32":
            versus = path
        else:
            versus = float_isa_of(auto[kind] if path == "auto" else path, float_isas, top_isa)
        base = times[("rnnfast", "float32", versus)]["median_s"]
        T, B, D, H = case
        rows.append(
            {
                "cell": cell_name,
                "T": T,
                "B": B,
                "D": D,
                "H": H,
                "threads": threads,
                "lib": lib,
                "kind": kind,
                "path": f"auto={auto[kind]}" if path == "auto" else path,
                "median_s": t["median_s"],
                "samples_s": t["samples_s"],
                "versus_float32_isa": versus,
                "speedup": base / t["median_s"],
                "versus_torch_int8": torch_int8 / t["median_s"],
                "weight_bytes": found[(lib, kind, path)][1],
                "relative_error": errors[(lib, kind, path)],
            }
        )
    return rows


COLUMNS = [
    ("cell", ">4", cell("cell")),
    *SHAPE_COLUMNS,
    ("lib", ">7", cell("lib")),
    ("kind", ">7", cell("kind")),
    ("path", ">18", cell("path")),
    ("ms", ">9", lambda r: f"{r['median_s'] * 1e3:.3f}"),
    ("vs f32 on", ">9", cell("versus_float32_isa")),
    ("speedup", ">8", cell("speedup", ".2f", "x")),
    ("vs t-int8", ">9", cell("versus_torch_int8", ".2f", "x")),
    ("weights", ">10", lambda r: f"{r['weight_bytes'] / 2**20:.3f}Mi"),
    ("rel err", ">8", cell("relative_error", ".1e")),
]


def targets(rows):
    """Issue 24's speed targets on the automatic rows: (text, value, met) per check."""
    out = []
    for r in rows:
        if r["lib"] != "rnnfast" or not r["path"].startswith("auto="):
            continue
        where = f"{r['cell']} {r['T']},{r['B']},{r['D']},{r['H']} {r['threads']}t {r['path']}"
        x, kind = r["speedup"], r["kind"]
        out.append((f"{kind} never slower than float32 ({where})", x, x >= 1.0))
        if r["B"] == 1 and r["H"] == 1024:
            goal = {"int8": 3.0, "bf16": 1.8}[kind]
            out.append((f"{kind} >= {goal:g}x float32 at B=1, H=1024 ({where})", x, x >= goal))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", default="gru,lstm", help="gru,lstm (default: %(default)s)")
    parser.add_argument("--cases", default=DEFAULT_CASES, help="T,B,D,H;... (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=rnnfast.get_num_threads())
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-repeat-s", type=float, default=0.2)
    parser.add_argument("--warmup-s", type=float, default=WARMUP_S)
    parser.add_argument("--out", type=Path, default=RESULTS / "quantized_gated.json")
    args = parser.parse_args(argv)
    cells, cases = parse_cells(args.cells), parse_cases(args.cases)
    if args.threads < 1:
        raise SystemExit(f"--threads: expected a positive int, got {args.threads}")
    paths = {kind: _core.quantized_paths(kind) for kind in MODES}
    meta = {
        "cpu": cpu_model(),
        "machine": platform.machine(),
        "isa": _core.active_isa(),
        "float_isas": _core.supported_isas(),
        "quantized_paths": paths,
        "auto_paths": {kind: _core.quantized_path(kind) for kind in MODES},
        "threads": args.threads,
        "torch": torch.__version__,
        "torch_quantized_engine": torch.backends.quantized.engine,
        "torch_blas": torch_blas(),
    }
    print(
        f"{meta['cpu']}; float ISA {meta['isa']} (of {', '.join(meta['float_isas'])}); "
        + "; ".join(
            f"{k} paths {', '.join(v)} (auto {meta['auto_paths'][k]})" for k, v in paths.items()
        )
        + f"; threads {args.threads}; torch {meta['torch']} ({meta['torch_quantized_engine']} "
        f"engine; {meta['torch_blas']})"
    )
    rows = []
    with thread_count(args.threads):
        for cell_name in cells:
            for case in cases:
                new = case_rows(cell_name, case, args.threads, args)
                print(text_table(COLUMNS, new), flush=True)
                rows += new
    checks = targets(rows)
    print("\nissue 24's targets (automatic path; x = rnnfast float32 time / quantized time):")
    for text, x, met in checks:
        print(f"  {'MET   ' if met else 'MISSED'} {x:6.2f}x  {text}")
    found = [{"target": t, "speedup": x, "met": met} for t, x, met in checks]
    write_json(args.out, {"meta": meta, "rows": rows, "targets": found})
    return rows


if __name__ == "__main__":
    main()
