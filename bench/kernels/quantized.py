"""Quantized inference measured (issue 16): ``_core.quantized_rnn_forward`` with int8 and bf16
weights on each quantized path this CPU runs, against rnnfast's float32 forward on the same
shapes, side by side in one process.

    python -m bench.kernels.quantized [--cases "T,B,D,H;..."] [--threads N] [--repeats 7]
                                      [--min-repeat-s 0.2] [--out PATH]

One tanh layer, x (T, B, D), h0 = 0, the combined bias, every h_t returned (return_sequences).
Times are medians of repeats alternating between all the variants of a case (bench/_common.py);
speedup = float32 time / quantized time (> 1: the quantized forward is faster), float32 run on
the float ISA under which the path is the automatic choice (avx2 and avx_vnni against float32
avx2, the AVX-512 and AMX paths against float32 avx512: what a user of that machine gains).
Each row names
the path it ran on ("auto" is the path chosen for the active float ISA), the bytes of the packed
weights (W_ih and W_hh) beside float32's, and the largest |h - h_float32| of the outputs.
Writes JSON (default bench/results/quantized.json).
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import numpy as np

import rnnfast
from bench import RESULTS
from bench._common import parse_cases, thread_count, time_alternating, write_json
from rnnfast import _core
from rnnfast.nn.quantized.formats import QuantizedWeight

# The float ISA under which each quantized path is the automatic choice ("auto" runs on the
# best one, as the float32 row of the machine's best ISA).
FLOAT_ISA_OF = {
    "baseline": "baseline",
    "avx2": "avx2",
    "avx_vnni": "avx2",
    "avx512_vnni": "avx512",
    "avx512_bf16": "avx512",
    "amx": "avx512",
}

# (T, B, D, H): the two targets, then small shapes (never slower than float32)
DEFAULT_CASES = "100,1,1024,1024;50,64,1024,1024;100,1,32,64;100,16,64,128;50,8,256,256;20,4,16,32"


def quantized_weights(kind, w):
    """The kernels' packed copy of ``w`` quantized as rnnfast.quantize stores it."""
    return QuantizedWeight.from_float(kind, w).packed


def forward_on(path, isa, x, w_ih, w_hh, bias):
    """A call of the quantized forward on a forced path ('' = automatic) under a float ISA (its
    tanh is the float kernels')."""

    def run():
        _core.set_active_isa(isa)
        _core.set_quantized_path(path)
        return _core.quantized_rnn_forward(x, None, w_ih, w_hh, bias, None, "tanh", 1.0, True)

    return run


def case_rows(case, repeats, min_repeat_s):
    T, B, D, H = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    w_ih = (rng.standard_normal((H, D)) / np.sqrt(D)).astype(np.float32)
    w_hh = (rng.standard_normal((H, H)) * (0.9 / np.sqrt(H))).astype(np.float32)
    bias = (rng.standard_normal(H) * 0.1).astype(np.float32)

    def float32_on(isa):
        def run():
            _core.set_active_isa(isa)
            return _core.rnn_forward(x, None, w_ih, w_hh, bias, None, None, "tanh", 1.0, True)

        return run

    top_isa = _core.active_isa()
    float_isas = _core.supported_isas()
    fns = {("float32", isa): float32_on(isa) for isa in float_isas}
    float32 = float32_on(top_isa)
    packed = {}
    for kind in ("int8", "bf16"):
        wi, wh = quantized_weights(kind, w_ih), quantized_weights(kind, w_hh)
        packed[kind] = wi.nbytes + wh.nbytes
        fns[(kind, "auto")] = forward_on("", top_isa, x, wi, wh, bias)
        for path in _core.quantized_paths(kind):
            isa = FLOAT_ISA_OF.get(path, top_isa)
            isa = isa if isa in float_isas else top_isa
            fns[(kind, path)] = forward_on(path, isa, x, wi, wh, bias)
    try:
        y32 = float32()[0]
        errors = {k: float(np.abs(fn()[0] - y32).max()) for k, fn in fns.items()}
        times = time_alternating(fns, repeats, min_repeat_s)
        _core.set_quantized_path("")
        _core.set_active_isa(top_isa)
        auto = {kind: _core.quantized_path(kind) for kind in ("int8", "bf16")}
    finally:
        _core.set_quantized_path("")
        _core.set_active_isa(top_isa)
    rows = []
    for (kind, path), t in times.items():
        # against float32 on the float ISA that would choose this path automatically
        versus = path if kind == "float32" else FLOAT_ISA_OF.get(path, top_isa)
        versus = versus if versus in float_isas else top_isa
        base = times[("float32", versus)]["median_s"]
        rows.append(
            {
                "T": T,
                "B": B,
                "D": D,
                "H": H,
                "kind": kind,
                "path": path if path != "auto" else f"auto={auto[kind]}",
                "median_s": t["median_s"],
                "samples_s": t["samples_s"],
                "versus_float32_isa": versus,
                "speedup": base / t["median_s"],
                "weight_bytes": packed.get(kind, 4 * (w_ih.size + w_hh.size)),
                "max_abs_diff_vs_float32": errors[(kind, path)],
            }
        )
    return rows


def print_rows(rows):
    print(
        f"{'T,B,D,H':>18} {'kind':>7} {'path':>18} {'ms':>9} {'vs f32 on':>9} {'speedup':>8}"
        f" {'weights':>10}"
        f" {'max|dh|':>9}"
    )
    for r in rows:
        shape = f"{r['T']},{r['B']},{r['D']},{r['H']}"
        print(
            f"{shape:>18} {r['kind']:>7} {r['path']:>18} {r['median_s'] * 1e3:9.3f}"
            f" {r['versus_float32_isa']:>9} {r['speedup']:8.2f} {r['weight_bytes'] / 2**20:8.3f}Mi {r['max_abs_diff_vs_float32']:9.2e}"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=DEFAULT_CASES, help="T,B,D,H;... (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=rnnfast.get_num_threads())
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-repeat-s", type=float, default=0.2)
    parser.add_argument("--out", type=Path, default=RESULTS / "quantized.json")
    args = parser.parse_args(argv)
    cases = parse_cases(args.cases)
    print(
        f"float ISA {_core.active_isa()}, quantized paths {_core.quantized_paths()}, "
        f"threads {args.threads}, {platform.processor() or platform.machine()}"
    )
    rows = []
    with thread_count(args.threads):
        for case in cases:
            new = case_rows(case, args.repeats, args.min_repeat_s)
            print_rows(new)
            rows += new
    meta = {
        "isa": _core.active_isa(),
        "quantized_paths": _core.quantized_paths(),
        "threads": args.threads,
        "machine": platform.machine(),
    }
    write_json(args.out, {"meta": meta, "rows": rows})


if __name__ == "__main__":
    main()
