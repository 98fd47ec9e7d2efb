"""latency's bounds: the L2 read bandwidth of one core, measured here, and the bound of a row.

At B <= 16 (MATVEC_MAX_BATCH) a recurrent step is a matrix @ vector product against W_hh, whose
weights can stay in each core's L2 across the steps: the bound is

    forward   T * bytes(W_hh) / (threads * L2 bandwidth) + the input projection's FLOPs / peak
    train     2 * T * bytes(W_hh) / (threads * L2 bandwidth)  (dh_{t-1} = ... W_hh: W_hh read
              again per step) + the rest of training's FLOPs (3x the forward's, less the two
              recurrent products) / peak

(weight-stationary threads: each reads its share of W_hh from its own core's L2, so the bandwidth
scales with the threads). At larger B it is the roofline, FLOPs / peak. bytes(W_hh) counts each
weight at the format's width: float32 4 bytes, bf16 2, int8 1 (scales not counted). The peak is
compare's float32 matmul rate (roofline.py, measured at the row's thread count); bf16's is
bench.kernels.bf16_training's (2x float32, or torch's measured bf16 matmul where rnnfast's bf16
runs on AMX); int8's is assumed INT8_OVER_BF16 x bf16's (VPDPBUSD: 4 products per 32-bit lane,
AMX-INT8: twice AMX-BF16's rate). At H = 64 the whole W_hh fits in L1, whose bandwidth is higher:
rows above 100% of their bound are possible there.

The L2 bandwidth is the faster of two NumPy reads of a buffer of half the L2 (read from
rnnfast's cache sizes), on one core at one thread: a matrix @ vector product over a batch whose
every matrix is that buffer (a stride-0 batch, so that one call reads it many times and Python's
call overhead does not count), and the buffer's max (NumPy's vectorised reduction). Both stay in
L2; neither is a hand-tuned read loop, so the figure is a floor of the hardware's bandwidth and
the bound a generous one.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from bench._common import cores_for, pinned_to, thread_count, time_each
from bench.kernels.bf16_training import roofline
from bench.peers.compare.shapes import Problem, mode_flops
from rnnfast import _core

MATVEC_MAX_BATCH = 16  # at B <= 16 a step is a matrix @ vector product: the L2 bound applies
BYTES_PER_WEIGHT = {"float32": 4, "bf16": 2, "int8": 1}
INT8_OVER_BF16 = 2.0  # the int8 products' peak / bf16's (module docstring)
L2_FALLBACK = 1 << 20  # where rnnfast cannot read the cache sizes
BATCH_READ_BYTES = 64 << 20  # what one timed call of the batched product reads


def measure_l2_bandwidth(repeats: int) -> dict:
    """Bytes/s of NumPy's reads of an L2-resident buffer on one core (module docstring)."""
    l2 = int(_core.cache_sizes().get("l2") or 0) or L2_FALLBACK
    n = 256
    rows = max(1, l2 // 2 // (4 * n))
    m = np.random.default_rng(2).standard_normal((rows, n)).astype(np.float32)
    v = np.ones(n, np.float32)
    reps = max(1, BATCH_READ_BYTES // m.nbytes)
    batch = as_strided(m, shape=(reps, rows, n), strides=(0, *m.strides), writeable=False)
    flat = m.reshape(-1)
    with thread_count(1), pinned_to(cores_for(1)):
        timed = time_each(
            {"batched_matvec": lambda: np.matmul(batch, v), "max": flat.max}, repeats, 0.02, 0.05
        )
    rates = {
        "batched_matvec": reps * m.nbytes / timed["batched_matvec"]["median_s"],
        "max": m.nbytes / timed["max"]["median_s"],
    }
    best = max(rates, key=rates.get)
    return {
        "l2_bytes": l2,
        "buffer_bytes": m.nbytes,
        "bytes_per_s": rates[best],
        "from": best,
        "bytes_per_s_by_read": rates,
    }


def measure_bounds(threads_list: list, repeats: int) -> dict:
    """The L2 bandwidth, and bf16_training's rooflines (compare's float32 one and bf16's) at each
    thread count, each on that many cores."""
    roofs = {}
    for n in threads_list:
        with pinned_to(cores_for(n)):
            roofs[n] = roofline(n, repeats)
    return {"l2": measure_l2_bandwidth(max(3, repeats)), "roofline": roofs}


def peak_gflops(fmt: str, roof: dict) -> float:
    """The matmul peak a format's products are set against (module docstring)."""
    if fmt == "float32":
        return roof["float32"]["matmul_gflops"]
    key = "measured_matmul_gflops" if _core.bf16_products_path() == "amx" else "matmul_gflops"
    bf16 = roof["bf16"][key]
    return bf16 if fmt == "bf16" else INT8_OVER_BF16 * bf16


def recurrent_flops(p: Problem) -> int:
    """The forward's recurrent products, 2*T*B*H*H per gate block."""
    return 2 * p.T * p.B * p.H * p.H * p.cell.gates


def bound_seconds(p: Problem, fmt: str, mode: str, threads: int, bounds: dict) -> tuple:
    """(seconds, "l2" or "roofline") of a row (module docstring)."""
    flops = mode_flops(p, "train" if mode == "train" else "fwd_seq")
    peak = peak_gflops(fmt, bounds["roofline"][threads]) * 1e9
    if p.B > MATVEC_MAX_BATCH:
        return flops / peak, "roofline"
    passes = 2 if mode == "train" else 1
    weights = p.T * p.w_hh.size * BYTES_PER_WEIGHT[fmt] * passes
    rest = flops - passes * recurrent_flops(p)
    return weights / (threads * bounds["l2"]["bytes_per_s"]) + rest / peak, "l2"
