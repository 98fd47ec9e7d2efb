"""compare's roofline: the machine's best matmul rate and matrix @ vector bandwidth at a thread
count, each the faster of NumPy's BLAS and torch's (MKL) measured side by side in the same run, and
the roofline time of a problem's mode that they give.

Both BLAS libraries are measured because neither is best everywhere: on the VM of issue 13, MKL ran
the recurrence's small-M GEMMs 1.3-2.5x faster than OpenBLAS while both reach about the same rate
on a large square matmul; taking the faster one keeps the roofline an upper bound."""

from __future__ import annotations

import numpy as np
import torch

from bench._common import blas_info, thread_count, time_each
from bench.peers.compare.shapes import Problem, mode_flops

MATMUL_N = 2048
MATVEC_BYTES = 4 << 20  # 4 MiB: beyond L2, the bandwidth W_hh's trips through the caches get


def best_of(rates: dict) -> tuple[str, float]:
    """(library, rate) of the fastest library in {library: rate}; the first one on a tie."""
    name = max(rates, key=lambda k: rates[k])
    return name, rates[name]


def measure_roofline(dtype, threads: int, repeats: int) -> dict:
    """Matmul GFLOP/s at 2048^3 and matrix @ vector bytes/s on a 4 MiB matrix, in NumPy and torch.

    Every library runs at `threads` threads (threadpoolctl for NumPy's BLAS, torch.set_num_threads
    for torch); each is warmed up before its repeats (_common.time_each), so that the other's
    spinning worker threads are gone when it is timed."""
    rng = np.random.default_rng(1)
    n = MATMUL_N
    a, b = rng.standard_normal((n, n)).astype(dtype), rng.standard_normal((n, n)).astype(dtype)
    cols = MATVEC_BYTES // (1024 * np.dtype(dtype).itemsize)  # 1024 x 1024 in float32
    m, v = rng.standard_normal((1024, cols)).astype(dtype), rng.standard_normal(cols).astype(dtype)
    ta, tb, tm, tv = (torch.from_numpy(t) for t in (a, b, m, v))
    with thread_count(threads):
        matmul = time_each(
            {"numpy": lambda: a @ b, "torch": lambda: torch.matmul(ta, tb)}, repeats, 0.0
        )
        matvec = time_each(
            {"numpy": lambda: m @ v, "torch": lambda: torch.mv(tm, tv)}, repeats, 0.02
        )
        info = blas_info()
    matmul_rates = {k: 2 * n**3 / t["median_s"] / 1e9 for k, t in matmul.items()}
    matvec_rates = {k: m.nbytes / t["median_s"] for k, t in matvec.items()}
    return roofline_record(dtype, threads, matmul_rates, matvec_rates, list(m.shape), info)


def roofline_record(
    dtype, threads, matmul_gflops: dict, matvec_bytes_per_s: dict, matvec_shape, blas
) -> dict:
    """The roofline of one dtype and thread count: both libraries' rates and the faster's."""
    matmul_lib, matmul_best = best_of(matmul_gflops)
    matvec_lib, matvec_best = best_of(matvec_bytes_per_s)
    return {
        "dtype": np.dtype(dtype).name,
        "threads": threads,
        "matmul_n": MATMUL_N,
        "matmul_gflops": matmul_best,
        "matmul_from": matmul_lib,
        "matmul_gflops_by_lib": matmul_gflops,
        "matvec_shape": list(matvec_shape),
        "matvec_bytes": int(np.prod(matvec_shape)) * np.dtype(dtype).itemsize,
        "matvec_bytes_per_s": matvec_best,
        "matvec_from": matvec_lib,
        "matvec_bytes_per_s_by_lib": matvec_bytes_per_s,
        "blas": blas,
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
