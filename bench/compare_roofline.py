"""compare.py's BLAS anchor: NumPy's matmul rate and matrix @ vector bandwidth at a thread count,
and the roofline time of a problem's mode that they give."""

from __future__ import annotations

import statistics

import numpy as np
import threadpoolctl
from compare_shapes import Problem, mode_flops
from harness import WARMUP_S, blas_info, time_loop, warm_up


def measure_roofline(dtype, threads: int, repeats: int) -> dict:
    """NumPy's matmul rate at 2048^3 and matrix @ vector bandwidth on a 4 MiB matrix."""
    rng = np.random.default_rng(1)
    n = 2048
    a, b = rng.standard_normal((n, n)).astype(dtype), rng.standard_normal((n, n)).astype(dtype)
    cols = (4 << 20) // (1024 * np.dtype(dtype).itemsize)  # 1024 x 1024 in float32
    m, v = rng.standard_normal((1024, cols)).astype(dtype), rng.standard_normal(cols).astype(dtype)
    with threadpoolctl.threadpool_limits(limits=threads):
        a @ b
        matmul_s = statistics.median(time_loop(lambda: a @ b, 1) for _ in range(repeats))
        inner = warm_up(lambda: m @ v, WARMUP_S, 0.02)
        matvec_s = statistics.median(time_loop(lambda: m @ v, inner) for _ in range(repeats))
        info = blas_info()
    return {
        "dtype": np.dtype(dtype).name,
        "threads": threads,
        "matmul_n": n,
        "matmul_gflops": 2 * n**3 / matmul_s / 1e9,
        "matvec_shape": list(m.shape),
        "matvec_bytes": m.nbytes,
        "matvec_bytes_per_s": m.nbytes / matvec_s,
        "blas": info,
    }


def roofline_seconds(p: Problem, mode: str, roof: dict) -> float:
    """max(FLOPs / matmul rate, T * bytes(W_hh) / matvec bandwidth) at the same thread count."""
    compute = mode_flops(p, mode) / (roof["matmul_gflops"] * 1e9)
    weights = p.T * p.w_hh.nbytes / roof["matvec_bytes_per_s"]
    return max(compute, weights)


def roofline_note(rows: list) -> str | None:
    """One note on the rows faster than their roofline, if any are."""
    above = [r for r in rows if r["libs"]["rnnfast"]["roofline_fraction"] > 1.0]
    if not above:
        return None
    return (
        f"{len(above)} row(s) above 100% of their roofline: that roofline was measured low "
        "(a busy machine, or data that stays in cache beats the 4 MiB matvec)"
    )
