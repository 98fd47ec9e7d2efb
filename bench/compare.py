"""Speed of rnnfast against the NumPy reference, torch.nn.RNN and ONNX Runtime's RNN operator.

Run from the repository root:

    python bench/compare.py              # full grid, threads 1 and 2, float32 (+ float64 subset)
    python bench/compare.py --quick      # smoke run: 3 shapes (1 in float64), 3 repeats
    python bench/compare.py --shapes 200x1x32x64,50x32x512x512 --threads 1 --dtype float32

For each shape (T, B, D, H) and thread count it times three modes:

    fwd_seq   forward inference returning every h_t          (torch under no_grad, ORT: Y)
    fwd_last  forward inference returning only h_T           (rnnfast: return_sequences=False,
                                                              ORT: a graph with Y_h only)
    train     forward + backward of sum(y), i.e. dy = ones   (torch: autograd; no ORT)

Every library gets the same weights (the torch module's state_dict) and must agree with the others
before anything is timed; a disagreement aborts the run. Times are medians of --repeats repeats,
each library timed in turn after a warm-up of 0.25 s. The report gives milliseconds, GFLOP/s
(forward FLOPs = 2*T*B*(D*H + H*H), training = 3x), the speed-up of rnnfast over each peer
(peer_time / rnnfast_time), each row's fraction of the machine's roofline
(max(FLOPs / NumPy matmul rate, T * bytes(W_hh) / NumPy matvec bandwidth), measured at the same
thread count) and a "targets" section.
Column "busy" is the CPUs other processes used meanwhile: on a shared machine, rows with busy > 0
(above all the multi-threaded ones) are not to be trusted. Results go to
bench/results/compare.json and a chart of the speed-ups to bench/results/compare.png.

NumPy's OpenBLAS is slowed by OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE overrides that some machines set;
this script re-executes itself without them before it measures anything.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import psutil
import rnnfast
import threadpoolctl
import torch
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented
from rnnfast import functional, reference

# ----------------------------------------------------------------------------- environment

BLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
REEXEC_MARKER = "_RNNFAST_BENCH_UNSET"


def reexec_without_blas_overrides() -> None:
    """Restart this script with the OpenBLAS overrides removed from the environment, if any is set.

    OpenBLAS reads them once, when it loads, so this process cannot undo them; its replacement
    starts clean.
    """
    found = [name for name in BLAS_OVERRIDES if name in os.environ]
    if not found:
        return
    settings = ", ".join(f"{name}={os.environ[name]}" for name in found)
    print(
        f"compare.py: {settings} set; re-executing with {' and '.join(BLAS_OVERRIDES)} unset "
        "so that NumPy's BLAS picks its own kernels",
        flush=True,
    )
    env = {k: v for k, v in os.environ.items() if k not in BLAS_OVERRIDES}
    env[REEXEC_MARKER] = settings
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


# ----------------------------------------------------------------------------- configuration

GRID = [
    (200, 1, 32, 64),
    (100, 16, 64, 128),
    (50, 64, 128, 256),
    (50, 32, 512, 512),
    (25, 64, 1024, 1024),
    (100, 1, 1024, 1024),
]
QUICK_GRID = [(200, 1, 32, 64), (100, 16, 64, 128), (50, 32, 512, 512)]
FLOAT64_SUBSET = [(200, 1, 32, 64), (100, 16, 64, 128), (50, 32, 512, 512)]
QUICK_FLOAT64_SUBSET = [(100, 16, 64, 128)]
STREAMING_SHAPE = (200, 1, 32, 64)

MODES = ("fwd_seq", "fwd_last", "train")
LIBS = ("rnnfast", "torch", "ort", "numpy")  # "numpy" is rnnfast.reference
PEERS = LIBS[1:]
TOL = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-9}  # max|a-b| / max|b|
WARMUP_S = 0.25  # each library runs itself this long before it is timed (see time_each)

OUT_DIR = Path(__file__).resolve().parent / "results"


# ----------------------------------------------------------------------------- problems


@dataclass
class Problem:
    """One shape in one dtype: the inputs and the torch module whose weights everyone uses."""

    T: int
    B: int
    D: int
    H: int
    dtype: np.dtype
    x: np.ndarray
    w_ih: np.ndarray
    w_hh: np.ndarray
    b_ih: np.ndarray
    b_hh: np.ndarray
    dy: np.ndarray
    module: torch.nn.RNN

    @property
    def shape(self):
        return (self.T, self.B, self.D, self.H)

    @property
    def label(self):
        return "x".join(map(str, self.shape))


def make_problem(shape, dtype, seed=0) -> Problem:
    T, B, D, H = shape
    torch.manual_seed(seed)
    torch_dtype = torch.float64 if dtype == np.float64 else torch.float32
    module = torch.nn.RNN(D, H, nonlinearity="tanh").to(torch_dtype)
    state = {k: v.detach().numpy() for k, v in module.state_dict().items()}
    x = np.random.default_rng(seed).standard_normal((T, B, D)).astype(dtype)
    return Problem(
        T,
        B,
        D,
        H,
        np.dtype(dtype),
        x,
        state["weight_ih_l0"],
        state["weight_hh_l0"],
        state["bias_ih_l0"],
        state["bias_hh_l0"],
        np.ones((T, B, H), dtype),
        module,
    )


def forward_flops(p: Problem) -> int:
    return 2 * p.T * p.B * (p.D * p.H + p.H * p.H)


def mode_flops(p: Problem, mode: str) -> int:
    return 3 * forward_flops(p) if mode == "train" else forward_flops(p)


# ----------------------------------------------------------------------------- libraries
#
# Each library gives, per mode it supports, a pair (run, named): run() is what is timed and returns
# the library's raw result; named(raw) turns that into {name: ndarray} for the agreement check.


def grads_named(dx, dweight_ih, dweight_hh, dbias_ih, dbias_hh):
    return {
        "dx": dx,
        "dweight_ih": dweight_ih,
        "dweight_hh": dweight_hh,
        "dbias_ih": dbias_ih,
        "dbias_hh": dbias_hh,
    }


# rnn_backward's required keywords for a forward given none of these options (h0 included).
PLAIN_BACKWARD = {"h0": None, "nonlinearity": "tanh", "lengths": None, "alpha": 1.0,
                  "step_mask": None, "zero_output_for_mask": False, "recurrent_mask": None}


def rnnfast_runners(p: Problem):
    args = (p.x, p.w_ih, p.w_hh, p.b_ih, p.b_hh)

    def fwd_seq():
        return functional.rnn_forward(*args)

    def fwd_last():
        return functional.rnn_forward(*args, return_sequences=False)[1]

    def train():
        y, _ = functional.rnn_forward(*args)
        return functional.rnn_backward(p.x, p.w_ih, p.w_hh, y, dy=p.dy, **PLAIN_BACKWARD)

    def train_named(g):
        return {**grads_named(g.dx, g.dweight_ih, g.dweight_hh, g.dbias, g.dbias), "dh0": g.dh0}

    return {
        "fwd_seq": (fwd_seq, lambda r: {"y": r[0], "h_n": r[1]}),
        "fwd_last": (fwd_last, lambda r: {"h_n": r}),
        "train": (train, train_named),
    }


def reference_runners(p: Problem):
    """The NumPy reference has no last-state-only mode: fwd_last runs the full forward."""
    args = (p.x, p.w_ih, p.w_hh, p.b_ih, p.b_hh)

    def fwd_seq():
        return reference.rnn_forward(*args)

    def fwd_last():
        return reference.rnn_forward(*args)[1]

    def train():
        y, _ = reference.rnn_forward(*args)
        return reference.rnn_backward(p.x, p.w_ih, p.w_hh, y, dy=p.dy, **PLAIN_BACKWARD)

    def train_named(g):
        dx, dh0, dw_ih, dw_hh, db = g
        return {**grads_named(dx, dw_ih, dw_hh, db, db), "dh0": dh0}

    return {
        "fwd_seq": (fwd_seq, lambda r: {"y": r[0], "h_n": r[1]}),
        "fwd_last": (fwd_last, lambda r: {"h_n": r}),
        "train": (train, train_named),
    }


def torch_runners(p: Problem):
    """torch computes y in both inference modes; training also asks for dx, as rnnfast gives it."""
    m = p.module
    xt = torch.from_numpy(p.x)
    x_grad = xt.clone().requires_grad_(True)
    params = [m.weight_ih_l0, m.weight_hh_l0, m.bias_ih_l0, m.bias_hh_l0]

    def fwd_seq():
        with torch.no_grad():
            return m(xt)

    def fwd_last():
        with torch.no_grad():
            return m(xt)[1]

    def train():
        y, _ = m(x_grad)
        return torch.autograd.grad(y.sum(), [x_grad, *params])

    return {
        "fwd_seq": (fwd_seq, lambda r: {"y": r[0].numpy(), "h_n": r[1][0].numpy()}),
        "fwd_last": (fwd_last, lambda r: {"h_n": r[0].numpy()}),
        "train": (train, lambda g: grads_named(*(t.numpy() for t in g))),
    }


def onnx_rnn_model(p: Problem, with_sequences: bool) -> onnx.ModelProto:
    """A one-node graph: ONNX RNN with W [1, H, D], R [1, H, H], B [1, 2H] = concat(Wb, Rb)."""
    elem = TensorProto.DOUBLE if p.dtype == np.float64 else TensorProto.FLOAT
    inits = [
        numpy_helper.from_array(p.w_ih[None], "W"),
        numpy_helper.from_array(p.w_hh[None], "R"),
        numpy_helper.from_array(np.concatenate([p.b_ih, p.b_hh])[None], "B"),
    ]
    outputs = [helper.make_tensor_value_info("Y_h", elem, [1, p.B, p.H])]
    if with_sequences:
        outputs.insert(0, helper.make_tensor_value_info("Y", elem, [p.T, 1, p.B, p.H]))
    node = helper.make_node(
        "RNN",
        ["X", "W", "R", "B"],
        ["Y" if with_sequences else "", "Y_h"],
        hidden_size=p.H,
        activations=["Tanh"],
    )
    graph = helper.make_graph(
        [node],
        "rnn",
        [helper.make_tensor_value_info("X", elem, [p.T, p.B, p.D])],
        outputs,
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8  # old enough for any onnxruntime that has opset 14
    return model


def ort_session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def ort_runners(p: Problem, threads: int):
    """Inference only. Raises if ORT cannot run this dtype (the caller skips ORT with a note)."""
    seq = ort_session(onnx_rnn_model(p, with_sequences=True), threads)
    last = ort_session(onnx_rnn_model(p, with_sequences=False), threads)
    feed = {"X": p.x}

    def fwd_seq():
        return seq.run(None, feed)

    def fwd_last():
        return last.run(None, feed)[0]

    fwd_seq()  # a kernel missing for this dtype only shows when it runs
    return {
        "fwd_seq": (fwd_seq, lambda r: {"y": r[0][:, 0], "h_n": r[1][0]}),
        "fwd_last": (fwd_last, lambda r: {"h_n": r[0]}),
    }


def all_runners(p: Problem, threads: int, notes: list):
    runners = {"rnnfast": rnnfast_runners(p), "torch": torch_runners(p)}
    try:
        runners["ort"] = ort_runners(p, threads)
    except OrtNotImplemented as exc:  # e.g. no float64 RNN kernel in ORT's CPU provider
        first_line = str(exc).strip().splitlines()[0][:160]
        note = f"ORT skipped for {p.dtype.name}: {type(exc).__name__}: {first_line}"
        if note not in notes:
            notes.append(note)
            log(note)
    runners["numpy"] = reference_runners(p)
    return runners


@contextlib.contextmanager
def thread_count(n: int):
    """n threads in every library: rnnfast, torch, NumPy's BLAS (ORT gets n per session)."""
    previous_torch = torch.get_num_threads()
    with threadpoolctl.threadpool_limits(limits=n), rnnfast.threads(n):
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(previous_torch)


# ----------------------------------------------------------------------------- agreement


def relative_error(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def check_agreement(p: Problem, mode: str, named_by_lib: dict) -> dict:
    """Compare every pair of libraries on the outputs they share; abort the run on a mismatch.

    Returns the largest relative error per output name."""
    tol = TOL[p.dtype]
    worst, failures = {}, []
    libs = list(named_by_lib)
    for i, a in enumerate(libs):
        for b in libs[i + 1 :]:
            for name in named_by_lib[a].keys() & named_by_lib[b].keys():
                err = relative_error(named_by_lib[a][name], named_by_lib[b][name])
                worst[name] = max(worst.get(name, 0.0), err)
                if not err <= tol:
                    failures.append(f"{a} vs {b}: {name} relative error {err:.3g} > {tol:g}")
    if failures:
        raise SystemExit(
            "\n".join(
                [f"DISAGREEMENT: {p.dtype.name} {p.label} mode {mode}; nothing timed:", *failures]
            )
        )
    return worst


# ----------------------------------------------------------------------------- timing


def time_loop(fn, inner: int) -> float:
    """Seconds per call of fn, over inner back-to-back calls."""
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - start) / inner


def warm_up(fn, warmup_s: float, min_repeat_s: float) -> int:
    """Call fn for at least warmup_s (at least once); return the calls per repeat that make one
    repeat last at least min_repeat_s."""
    calls, start = 0, time.perf_counter()
    while calls == 0 or time.perf_counter() - start < warmup_s:
        fn()
        calls += 1
    per_call = (time.perf_counter() - start) / calls
    return int(min(max(1, math.ceil(min_repeat_s / max(per_call, 1e-9))), 100_000))


def time_each(fns: dict, repeats: int, min_repeat_s: float) -> dict:
    """Median seconds per call of each function, timed one library after the other.

    Each library first warms up by running itself for WARMUP_S: that also outlasts the previous
    library's worker threads, which spin for a while after a call (OpenBLAS's for ~0.1 s) and
    would take a core from the next library. Interleaving the libraries' repeats let them do
    that; sleeping between them instead lets the idle CPUs of a virtual machine go cold."""
    out = {}
    for lib, fn in fns.items():
        inner = warm_up(fn, WARMUP_S, min_repeat_s)
        gc.collect()
        samples = [time_loop(fn, inner) for _ in range(repeats)]
        out[lib] = {"median_s": statistics.median(samples), "samples_s": samples, "inner": inner}
    return out


# ----------------------------------------------------------------------------- machine load


def cpu_clock() -> tuple:
    """(wall seconds, CPU seconds busy on the whole machine, CPU seconds used by this process)."""
    t = psutil.cpu_times()
    busy = (
        t.user
        + t.nice
        + t.system
        + getattr(t, "irq", 0)
        + getattr(t, "softirq", 0)
        + getattr(t, "steal", 0)
    )
    mine = psutil.Process().cpu_times()
    return time.monotonic(), busy, mine.user + mine.system


def others_cpus(since: tuple) -> float:
    """CPUs that other processes (and the hypervisor's steal) kept busy, on average, since then."""
    now = cpu_clock()
    wall = max(now[0] - since[0], 1e-9)
    return max(0.0, ((now[1] - since[1]) - (now[2] - since[2])) / wall)


BUSY_CPUS = 0.2  # others' average CPU use above which a block of timings is flagged


def load_note(rows: list, roofline_others: float) -> str | None:
    """One note on the rows timed while other processes were using the CPUs, if any were."""
    blocks = {(r["dtype"], r["threads"], r["label"]): r["others_cpus"] for r in rows}
    busy = [v for v in blocks.values() if v >= BUSY_CPUS]
    if not busy and roofline_others < BUSY_CPUS:
        return None
    return (
        f"other processes kept CPUs busy (column 'busy', up to {max(busy, default=0):.1f} "
        f"of {os.cpu_count()}) during {len(busy)} of {len(blocks)} shape/thread blocks and "
        f"{roofline_others:.1f} during the roofline measurement: those timings, above all "
        "the multi-threaded ones, are disturbed; rerun on an idle machine"
    )


# ----------------------------------------------------------------------------- roofline


def blas_info() -> list:
    keys = ("internal_api", "architecture", "version", "num_threads", "threading_layer", "prefix")
    return [
        {k: info.get(k) for k in keys}
        for info in threadpoolctl.threadpool_info()
        if info["user_api"] == "blas"
    ]


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
    above = [r for r in rows if r["libs"]["rnnfast"]["roofline_fraction"] > 1.0]
    if not above:
        return None
    return (
        f"{len(above)} row(s) above 100% of their roofline: that roofline was measured low "
        "(a busy machine, or data that stays in cache beats the 4 MiB matvec)"
    )


# ----------------------------------------------------------------------------- one shape


def bench_shape(p: Problem, threads: int, roof: dict, args, notes: list) -> tuple[list, dict]:
    """Check and time every mode of one problem at one thread count; returns (rows, agreement)."""
    rows, agreement = [], {}
    since = cpu_clock()
    with thread_count(threads):
        runners = all_runners(p, threads, notes)
        for mode in MODES:
            libs = {lib: r[mode] for lib, r in runners.items() if mode in r}
            named = {lib: to_named(run()) for lib, (run, to_named) in libs.items()}  # warm-up
            agreement[mode] = check_agreement(p, mode, named)
            del named
            rnnfast._core.clear_contention_backoff()
            timings = time_each(
                {lib: run for lib, (run, _) in libs.items()}, args.repeats, args.min_repeat_s
            )
            rows.append(make_row(p, threads, mode, timings, roof))
            if threads > 1 and rnnfast._core.contention_backoff_seconds() > 0:
                # rnnfast fell back to one thread for a while: the cores were taken by others
                notes.append(f"{p.label} {mode} at {threads} threads: rnnfast's contention "
                             "back-off started (busy machine); its timing is partly 1-thread")
        del runners
    others = others_cpus(since)
    if others >= BUSY_CPUS:
        log(f"  other processes used {others:.1f} CPUs meanwhile")
    for row in rows:
        row["others_cpus"] = others
    return rows, agreement


def make_row(p: Problem, threads: int, mode: str, timings: dict, roof: dict) -> dict:
    flops = mode_flops(p, mode)
    roof_s = roofline_seconds(p, mode, roof)
    libs = {
        lib: {
            "median_ms": t["median_s"] * 1e3,
            "gflops": flops / t["median_s"] / 1e9,
            "roofline_fraction": roof_s / t["median_s"],
            "samples_ms": [s * 1e3 for s in t["samples_s"]],
            "calls_per_repeat": t["inner"],
        }
        for lib, t in timings.items()
    }
    base = timings["rnnfast"]["median_s"]
    ratios = {peer: timings[peer]["median_s"] / base for peer in PEERS if peer in timings}
    return {
        "dtype": p.dtype.name,
        "threads": threads,
        "shape": dict(zip("TBDH", p.shape)),
        "label": p.label,
        "mode": mode,
        "flops": flops,
        "roofline_ms": roof_s * 1e3,
        "libs": libs,
        "speedup": ratios,
    }


# ----------------------------------------------------------------------------- report


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def print_roofline(roof: dict) -> None:
    blas = (
        "; ".join(
            f"{b['internal_api']} {b['version']} {b['architecture']} num_threads={b['num_threads']}"
            for b in roof["blas"]
        )
        or "none found"
    )
    print(
        f"roofline {roof['dtype']} threads={roof['threads']}: "
        f"matmul {roof['matmul_n']}^3 {roof['matmul_gflops']:.1f} GFLOP/s, "
        f"matvec {roof['matvec_shape'][0]}x{roof['matvec_shape'][1]} "
        f"{roof['matvec_bytes_per_s'] / 1e9:.1f} GB/s; BLAS: {blas}"
    )


def fmt(value, spec, missing="-"):
    return missing if value is None else format(value, spec)


def print_table(rows: list) -> None:
    head = (
        f"{'shape TxBxDxH':<18}{'mode':<9}{'rnnfast ms':>11}{'GFLOP/s':>9}{'roof%':>7}"
        + "".join(f"{p + ' ms':>11}{'x':>7}" for p in PEERS)
        + f"{'busy':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        me = r["libs"]["rnnfast"]
        peers = "".join(
            f"{fmt(r['libs'].get(p, {}).get('median_ms'), '.3f'):>11}"
            f"{fmt(r['speedup'].get(p), '.2f'):>7}"
            for p in PEERS
        )
        print(
            f"{r['label']:<18}{r['mode']:<9}{me['median_ms']:>11.3f}{me['gflops']:>9.2f}"
            f"{100 * me['roofline_fraction']:>6.0f}%" + peers + f"{r['others_cpus']:>6.1f}"
        )


def print_report(rows: list, roofs: dict, targets: list, notes: list) -> None:
    for (dtype, threads), roof in roofs.items():
        group = [r for r in rows if r["dtype"] == dtype and r["threads"] == threads]
        if not group:
            continue
        print()
        print_roofline(roof)
        print(
            "times: median ms per call; x = peer time / rnnfast time; roof% = roofline time / "
            "rnnfast time; numpy = rnnfast.reference; busy = CPUs other processes used"
        )
        print_table(group)
    print()
    print_targets(targets)
    for note in notes:
        print(f"note: {note}")


# ----------------------------------------------------------------------------- targets


def check(target, row, figure, goal, met, unit="x", detail=""):
    return {
        "target": target,
        "threads": row["threads"],
        "shape": row["label"],
        "mode": row["mode"],
        "figure": figure,
        "goal": goal,
        "unit": unit,
        "met": bool(met),
        "detail": detail,
    }


def peer_target(rows, peer, goal):
    """rnnfast >= goal x peer, or >= 80% of roofline where the peer is already above 80%."""
    out = []
    for r in rows:
        if r["mode"] == "train" or peer not in r["speedup"]:
            continue
        ratio, mine = r["speedup"][peer], r["libs"]["rnnfast"]["roofline_fraction"]
        peer_frac = r["libs"][peer]["roofline_fraction"]
        near_roof = peer_frac > 0.8
        met = ratio >= goal or (near_roof and mine >= 0.8)
        detail = f"{peer} at {100 * peer_frac:.0f}% of roofline, rnnfast {100 * mine:.0f}%"
        out.append(
            check(
                f"inference >= {goal}x {peer} (or >= 80% roofline if {peer} > 80%)",
                r,
                ratio,
                goal,
                met,
                detail=detail if near_roof else "",
            )
        )
    return out


def reference_targets(rows):
    out = []
    for r in rows:
        ratio = r["speedup"]["numpy"]
        out.append(check(">= 1x NumPy reference, every shape and mode", r, ratio, 1.0, ratio >= 1))
        if r["shape"]["H"] <= 256:
            out.append(check(">= 2x NumPy reference where H <= 256", r, ratio, 2.0, ratio >= 2))
    return out


def training_targets(rows):
    out = []
    for r in rows:
        if r["mode"] != "train":
            continue
        ratio, frac = r["speedup"]["torch"], r["libs"]["rnnfast"]["roofline_fraction"]
        out.append(
            check(
                "training >= 3x torch or >= 70% of training roofline",
                r,
                ratio,
                3.0,
                ratio >= 3 or frac >= 0.7,
                detail=f"roofline {100 * frac:.0f}%",
            )
        )
    return out


def streaming_targets(rows):
    label = "x".join(map(str, STREAMING_SHAPE))
    out = []
    for r in rows:
        if r["label"] == label and r["mode"] in ("fwd_seq", "fwd_last"):
            per_step_us = r["libs"]["rnnfast"]["median_ms"] * 1e3 / r["shape"]["T"]
            out.append(
                check(
                    f"streaming {label}: forward per step <= 0.25 us",
                    r,
                    per_step_us,
                    0.25,
                    per_step_us <= 0.25,
                    unit="us",
                )
            )
    return out


def scaling_targets(rows):
    """2 threads vs 1: >= 1.7x throughput where H >= 512, never slower anywhere."""
    one = {(r["label"], r["mode"]): r for r in rows if r["threads"] == 1}
    out = []
    for r in rows:
        if r["threads"] != 2 or (r["label"], r["mode"]) not in one:
            continue
        speedup = (
            one[(r["label"], r["mode"])]["libs"]["rnnfast"]["median_ms"]
            / r["libs"]["rnnfast"]["median_ms"]
        )
        out.append(check("2 threads never slower than 1", r, speedup, 1.0, speedup >= 1.0))
        if r["shape"]["H"] >= 512:
            out.append(
                check("2 threads >= 1.7x 1 thread where H >= 512", r, speedup, 1.7, speedup >= 1.7)
            )
    return out


def evaluate_targets(rows: list) -> list:
    """The project's performance targets, on the float32 rows only. Reported, never asserted."""
    f32 = [r for r in rows if r["dtype"] == "float32"]
    return (
        peer_target(f32, "torch", 3.0)
        + peer_target(f32, "ort", 1.5)
        + reference_targets(f32)
        + training_targets(f32)
        + streaming_targets(f32)
        + scaling_targets(f32)
    )


def print_targets(targets: list) -> None:
    """One line per target and thread count: how many rows meet it, the worst row, the misses."""
    print("targets (float32; figure vs goal; reported, not asserted)")
    groups = {}
    for t in targets:
        groups.setdefault((t["target"], t["threads"]), []).append(t)
    for (name, threads), checks in groups.items():
        met = sum(c["met"] for c in checks)
        lower_is_better = checks[0]["unit"] == "us"
        worst = (max if lower_is_better else min)(checks, key=lambda c: c["figure"])
        status = "MET" if met == len(checks) else "NOT MET"
        line = (
            f"  [{status:>7}] {name} (threads={threads}): {met}/{len(checks)} rows; "
            f"worst {worst['figure']:.2f}{worst['unit']} at {worst['shape']} {worst['mode']}"
        )
        misses = [
            f"{c['shape']} {c['mode']} {c['figure']:.2f}{c['unit']}"
            + (f" ({c['detail']})" if c["detail"] else "")
            for c in checks
            if not c["met"]
        ]
        print(line)
        if misses and len(misses) < len(checks):
            print(f"            misses: {'; '.join(misses)}")


# ----------------------------------------------------------------------------- outputs


def machine_info() -> dict:
    cpu = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "rnnfast": rnnfast.__version__,
        "rnnfast_isa": rnnfast._core.active_isa(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "onnxruntime": ort.__version__,
        "onnx": onnx.__version__,
        "blas_overrides_removed": os.environ.get(REEXEC_MARKER),
    }


def write_json(path: Path, args, rows, roofs, agreement, targets, notes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "args": {k: v for k, v in vars(args).items() if k not in ("out", "plot")},
        "tolerance": {k.name: v for k, v in TOL.items()},
        "roofline": list(roofs.values()),
        "results": rows,
        "agreement": agreement,
        "targets": targets,
        "notes": notes,
    }
    path.write_text(json.dumps(doc, indent=1, default=float))


def plot_speedups(path: Path, rows: list) -> None:
    """One panel per (dtype, threads) and mode: bars of peer_time / rnnfast_time per shape."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    groups = sorted({(r["dtype"], r["threads"]) for r in rows})
    fig, axes = plt.subplots(
        len(groups), len(MODES), squeeze=False, figsize=(5 * len(MODES), 3.2 * len(groups))
    )
    for gi, (dtype, threads) in enumerate(groups):
        for mi, mode in enumerate(MODES):
            ax = axes[gi][mi]
            sel = [
                r for r in rows if (r["dtype"], r["threads"], r["mode"]) == (dtype, threads, mode)
            ]
            width = 0.8 / len(PEERS)
            for pi, peer in enumerate(PEERS):
                xs = [i + (pi - (len(PEERS) - 1) / 2) * width for i in range(len(sel))]
                ys = [r["speedup"].get(peer, np.nan) for r in sel]
                ax.bar(xs, ys, width, label=peer)
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
            ax.yaxis.set_minor_formatter(ticker.NullFormatter())
            ax.set_xticks(
                range(len(sel)), [r["label"] for r in sel], rotation=30, ha="right", fontsize=7
            )
            ax.set_title(f"{mode}, {dtype}, {threads} thread(s)", fontsize=9)
            ax.set_ylabel("speed-up of rnnfast (x)", fontsize=8)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- main


def parse_shapes(text: str) -> list:
    """'200x1x32x64,50x32x512x512' -> [(200, 1, 32, 64), (50, 32, 512, 512)]."""
    shapes = []
    for item in text.split(","):
        parts = item.lower().split("x")
        if len(parts) != 4 or not all(v.isdigit() and int(v) > 0 for v in parts):
            raise ValueError(f"--shapes: expected TxBxDxH with positive integers, got {item!r}")
        shapes.append(tuple(int(v) for v in parts))
    return shapes


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 3 shapes (1 in float64), 3 repeats, short repeats",
    )
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats (default 7; quick 3)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument(
        "--shapes",
        default=None,
        help="comma-separated TxBxDxH (default: the grid; a shape need not be in it)",
    )
    ap.add_argument(
        "--dtype",
        default="default",
        choices=["default", "float32", "float64", "both"],
        help="default: float32 on every shape plus float64 on a subset",
    )
    ap.add_argument(
        "--min-repeat-ms",
        type=float,
        default=None,
        help="a repeat loops over calls for at least this long (default 20; quick 5)",
    )
    ap.add_argument("--out", type=Path, default=OUT_DIR / "compare.json")
    ap.add_argument("--plot", type=Path, default=None, help="PNG path (default: --out with .png)")
    args = ap.parse_args(argv)
    args.repeats = args.repeats or (3 if args.quick else 7)
    args.min_repeat_s = (args.min_repeat_ms or (5 if args.quick else 20)) / 1e3
    try:
        args.threads = [int(t) for t in args.threads.split(",")]
        args.shapes = parse_shapes(args.shapes) if args.shapes else None
    except ValueError as exc:
        ap.error(str(exc))
    args.shapes = args.shapes or (QUICK_GRID if args.quick else GRID)
    args.plot = args.plot or args.out.with_suffix(".png")
    if args.repeats < 1 or min(args.threads) < 1:
        ap.error("--repeats and --threads must be >= 1")
    return args


def work_list(args) -> list:
    """(dtype, shape) pairs to run, in order."""
    subset = QUICK_FLOAT64_SUBSET if args.quick else FLOAT64_SUBSET
    f64 = {
        "default": [s for s in args.shapes if s in subset],
        "float32": [],
        "float64": args.shapes,
        "both": args.shapes,
    }[args.dtype]
    f32 = [] if args.dtype == "float64" else args.shapes
    return [(np.float32, s) for s in f32] + [(np.float64, s) for s in f64]


def main(argv=None) -> None:
    reexec_without_blas_overrides()
    args = parse_args(argv)
    work = work_list(args)
    dtypes = sorted({np.dtype(d).name for d, _ in work}, key=["float32", "float64"].index)
    print(
        f"rnnfast {rnnfast.__version__} (isa {rnnfast._core.active_isa()}), torch "
        f"{torch.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}; "
        f"{os.cpu_count()} logical CPUs; repeats={args.repeats}"
    )
    if os.environ.get(REEXEC_MARKER):
        print(f"re-executed without {os.environ[REEXEC_MARKER]}")
    if max(args.threads) > (os.cpu_count() or 1):
        print(f"warning: more threads than the {os.cpu_count()} logical CPUs")

    rows, agreement, notes = [], [], []
    since = cpu_clock()
    time.sleep(0.5)
    others = others_cpus(since)
    if others >= BUSY_CPUS:
        print(
            f"warning: other processes are using {others:.1f} of {os.cpu_count()} CPUs; "
            "timings will be disturbed"
        )
    since = cpu_clock()
    roofs = {(d, n): measure_roofline(d, n, 5) for d in dtypes for n in args.threads}
    roofline_others = others_cpus(since)
    for dtype, shape in work:
        p = make_problem(shape, dtype)
        for n in args.threads:
            log(f"{p.dtype.name} {p.label} threads={n} ...")
            shape_rows, agree = bench_shape(p, n, roofs[(p.dtype.name, n)], args, notes)
            rows += shape_rows
            agreement.append(
                {"dtype": p.dtype.name, "threads": n, "shape": p.label, "max_relative_error": agree}
            )
    notes += [n for n in (load_note(rows, roofline_others), roofline_note(rows)) if n]
    targets = evaluate_targets(rows)
    print_report(rows, roofs, targets, notes)
    write_json(args.out, args, rows, roofs, agreement, targets, notes)
    plot_speedups(args.plot, rows)
    worst = max(
        (e for a in agreement for m in a["max_relative_error"].values() for e in m.values()),
        default=0.0,
    )
    print(
        f"all libraries agreed (largest relative difference {worst:.2g}); "
        f"wrote {args.out} and {args.plot}"
    )


if __name__ == "__main__":
    main()
