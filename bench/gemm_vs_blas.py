"""rnnfast's GEMM beside MKL (torch.matmul) and NumPy's BLAS (numpy @), in one process.

Run from the repository root:

    python bench/gemm_vs_blas.py                 # float32 and float64, 1 thread
    python bench/gemm_vs_blas.py --dtype float64 --threads 2 --repeats 7

The shapes are those of bench/cpp/bench_gemm.cpp (whose rows set rnnfast's kernel beside
OpenBLAS's sgemm / dgemm in C++): the recurrent step C = A W^T (M = B, K = N = H), the input
projection (M = T*B, K = D, N = H) and the weight gradients delta^T X (M = H, K = T*B). rnnfast
runs through its dense layer's binding (_core.dense_forward, the same GEMM kernels, which pack W
on every call, as torch and NumPy do; the recurrent layer packs W_hh once per sequence) and
_core.dense_backward's dW part is not timed alone, so the gradient rows use dense_forward on the
transposed operands, which is the same kernel reading A through a transposed view.

Each row: median seconds per call over --repeats alternating repeats, GFLOP/s of each library
and the ratio of rnnfast's rate to the best of the others ("best BLAS"), with met/missed against
the 95% target. Results go to bench/results/gemm_vs_blas.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from harness import blas_info, reexec_without_blas_overrides, thread_count, time_alternating

import rnnfast
from rnnfast import _core

TARGET = 0.95  # rnnfast's rate over the best BLAS's


def step_shapes() -> list:
    return [("step", m, h, h) for m in (1, 8, 16, 32, 64, 128) for h in (64, 256, 1024, 2048)]


def big_shapes() -> list:
    out = []
    for rows, d, h in ((3200, 128, 256), (1600, 512, 512), (1600, 1024, 1024), (800, 1760, 1760)):
        out += [("proj", rows, d, h), ("grad_hh", h, rows, h), ("grad_ih", h, rows, d)]
    return out


def operands(kind: str, m: int, k: int, n: int, dtype, rng) -> tuple:
    """(A, W) with C = A @ W.T of shape (m, n): W is (n, k), as the layers store it. For the
    gradients A is delta.T (a transposed view of a (k, m) array) and W is X.T."""
    if kind.startswith("grad"):
        delta = rng.uniform(-1, 1, (k, m)).astype(dtype)
        x = rng.uniform(-1, 1, (k, n)).astype(dtype)
        return delta.T, x.T
    return rng.uniform(-1, 1, (m, k)).astype(dtype), rng.uniform(-1, 1, (n, k)).astype(dtype)


def measure(kind, m, k, n, dtype, repeats, min_repeat_s, rng) -> dict:
    import torch

    a, w = operands(kind, m, k, n, dtype, rng)
    ta, tw = torch.from_numpy(a), torch.from_numpy(w)  # torch keeps the transposed views' strides
    fns = {
        "rnnfast": lambda: _core.dense_forward(a, w, None),
        "torch": lambda: torch.matmul(ta, tw.T),
        "numpy": lambda: a @ w.T,
    }
    ref = a.astype(np.float64) @ w.T.astype(np.float64)
    got = fns["rnnfast"]()
    err = float(np.max(np.abs(got - ref)) / max(1.0, float(np.max(np.abs(ref)))))
    if err > (1e-4 if dtype == np.float32 else 1e-12):
        raise SystemExit(f"{kind} {m}x{k}x{n}: rnnfast disagrees with float64 matmul ({err:.2e})")
    times = time_alternating(fns, repeats, min_repeat_s)
    flops = 2.0 * m * n * k
    row = {"kind": kind, "M": m, "K": k, "N": n, "dtype": np.dtype(dtype).name}
    for lib, t in times.items():
        row[f"{lib}_gflops"] = flops / t["median_s"] * 1e-9
    best = max(row["torch_gflops"], row["numpy_gflops"])
    row["ratio_to_best"] = row["rnnfast_gflops"] / best
    row["met"] = row["ratio_to_best"] >= TARGET
    return row


def main() -> None:
    reexec_without_blas_overrides()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", choices=["float32", "float64", "both"], default="both")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-repeat-s", type=float, default=0.02)
    parser.add_argument("--kinds", default="step,proj,grad_hh,grad_ih")
    parser.add_argument(
        "--out", default=str(Path(__file__).parent / "results" / "gemm_vs_blas.json")
    )
    args = parser.parse_args()
    import torch

    dtypes = [np.float32, np.float64] if args.dtype == "both" else [np.dtype(args.dtype).type]
    kinds = set(args.kinds.split(","))
    shapes = [s for s in step_shapes() + big_shapes() if s[0] in kinds]
    rng = np.random.default_rng(0)
    print(
        f"rnnfast ISA {_core.active_isa()}, {args.threads} thread(s); torch {torch.__version__}"
        f" ({torch.backends.mkl.is_available() and 'MKL' or 'no MKL'}); numpy BLAS "
        f"{[(b['internal_api'], b['architecture']) for b in blas_info()]}"
    )
    header = f"{'dtype':8} {'kind':8} {'M':>5} {'K':>5} {'N':>5} {'rnnfast':>8} {'torch':>8} {'numpy':>8} {'ratio':>6}"
    print(header + "  (GFLOP/s; ratio = rnnfast / best of torch, numpy)")
    rows = []
    with thread_count(args.threads):
        for dtype in dtypes:
            for kind, m, k, n in shapes:
                r = measure(kind, m, k, n, dtype, args.repeats, args.min_repeat_s, rng)
                rows.append(r)
                print(
                    f"{r['dtype']:8} {kind:8} {m:5} {k:5} {n:5} {r['rnnfast_gflops']:8.1f} "
                    f"{r['torch_gflops']:8.1f} {r['numpy_gflops']:8.1f} {r['ratio_to_best']:6.2f}"
                    f"  {'met' if r['met'] else 'missed'}",
                    flush=True,
                )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    info = {
        "isa": _core.active_isa(),
        "threads": args.threads,
        "rnnfast": rnnfast.__version__,
        "torch": torch.__version__,
        "blas": blas_info(),
        "argv": sys.argv[1:],
    }
    out.write_text(json.dumps({"machine": info, "rows": rows}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
