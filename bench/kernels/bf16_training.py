"""bf16 mixed-precision training and inference measured (issue 40): rnnfast's float32 kernels
under ``rnnfast.precision.products("bf16")`` (bf16 operands, float32 sums) against rnnfast
float32, PyTorch's ``torch.autocast("cpu", dtype=torch.bfloat16)`` and OpenVINO's bf16 inference,
side by side in one process.

    python -m bench.kernels.bf16_training                # the issue's 4 shapes, rnn/gru/lstm,
                                                         # 1 and 2 threads, train and infer
    python -m bench.kernels.bf16_training --quick        # 2 shapes, 3 short repeats
    python -m bench.kernels.bf16_training --json PATH    # the JSON elsewhere (default
                                                         # bench/results/bf16_training.json)
    python -m bench.kernels.bf16_training --cells lstm --shapes 50x32x512x512 --threads 1
    python -m bench.kernels.bf16_training --bf16-paths auto   # rnnfast's automatic bf16 path only
    python -m bench.kernels.bf16_training --emulate      # a CPU without bf16 products: the
                                                         # software rounding (a smoke run only)

How long: about 8 minutes on an idle 2-core AVX-512 / AMX VM (*estimate*, from single calls of
every row on one core: about 14 s per pass over the rows at 1 thread, each library warmed up for
0.25 s and timed 7 x >= 0.1 s); --quick about 1.5 minutes (*estimate*).

Two modes per cell (Elman tanh, GRU, LSTM; PyTorch's equations, initial weights and gate order),
shape T x B x D x H (--shapes; default 50x32x512x512, 25x64x1024x1024, 50x64x256x256,
100x16x64x128) and thread count (--threads; default 1,2):

    train   forward keeping its workspace + the full backward of dy = ones (dx, dh0, every weight
            and bias gradient): rnnfast.functional's *_forward / *_backward (the runners of
            bench.peers.compare), float32 and inside ``products("bf16")``; torch.nn.RNN / GRU /
            LSTM with autograd, float32 and with the forward under torch.autocast bf16 (the
            backward outside it, of y.float().sum(), as autocast is meant to be used)
    infer   forward over the sequence returning every h_t: rnnfast float32, the same under
            ``products("bf16")``, and rnnfast.quantize's bf16 weights (its kernels,
            ``functional.quantized_*_forward``); OpenVINO's CPU plugin on compare's ONNX graph
            (onnx_peers) with INFERENCE_PRECISION_HINT f32 and bf16

rnnfast's bf16 products run on the path it picks (``_core.bf16_products_path()``: "amx" or
"avx512_bf16"); where this build can be told to take another (``_core.set_bf16_path``),
--bf16-paths all (the default) times each other native path too, as "rnnfast_bf16@<path>",
alternating with the automatic one. The header names the paths, the CPU and its bf16 flags,
rnnfast's ISA, torch's version, BLAS and oneDNN, OpenVINO's version and settings; each infer row
keeps what OpenVINO's plugin made of the graph (the sequence node's runtime precision).

Every library runs on the row's cores only: this whole process pinned with os.sched_setaffinity
(every thread of it) to 1 core at 1 thread, the same 2 cores at 2 threads; rnnfast.threads(n),
torch.set_num_threads(n), NumPy's BLAS at n, OpenVINO's INFERENCE_NUM_THREADS = n. Times are
medians of --repeats repeats (each a loop of >= --min-repeat-s): rnnfast's variants alternate
(one thread pool, so a change in load lands on each alike), torch's and OpenVINO's are timed one
library after the other after a warm-up (bench/_common.py's time_alternating / time_each).

Ratios are the other side's time / the first's (> 1: the first is faster), e.g.
bf16_vs_torch_autocast = torch autocast time / rnnfast bf16 time. The issue's targets follow the
tables (reported, never asserted): training bf16 >= 1.25x torch autocast; bf16 >= 1.7x float32
where H >= 512 on the avx512_bf16 path and >= 3x on the amx path (on a CPU with AMX-BF16 where
no amx path ran, the automatic one is held to 3x); inference bf16 (products, and
rnnfast.quantize's) >= 1.2x OpenVINO bf16. Under --emulate no target is evaluated.

The bound beside each row: compare's roofline (max(FLOPs / matmul rate, T * bytes(W_hh) / matvec
bandwidth), each rate the faster of NumPy's BLAS and torch's in float32, measured here on the
row's cores and threads). FLOPs as compare counts them (forward 2*T*B*(D*H + H*H) per gate block,
training 3x). For bf16 (roofline_ms "bf16") the matmul rate is assumed 2x float32's: VDPBF16PS
does two multiply-adds per 32-bit lane where VFMADD231PS does one, assumed at the same issue
rate (on a core that issues it on fewer ports than the FMA the real peak is lower), and W_hh's
traffic counts 2 bytes a weight. What runs on AMX (rnnfast's amx path, and torch's and
OpenVINO's oneDNN on an AMX CPU) is set against "bf16_measured" instead: the faster of that and
torch's own bf16 matmul measured here (AMX's rate, far above 2x float32).

The correctness guard, before anything is timed: every rnnfast bf16 result (each path, and the
quantized weights) against rnnfast float32 on the same inputs, ||a - b|| / ||b|| per output (y
and the states; in training dx, dh0, dc0 and every weight and bias gradient), the worst printed
per row; a row above GUARD_LIMIT (5e-2) is FLAGGED, and so is one whose bf16 result equals
float32's (bf16 not applied), or whose rnnfast float32 disagrees with torch's / OpenVINO's
float32 (max|a - b| / max|b| > 1e-3). The peers' bf16 errors against their own float32 are
printed beside them (t-ac err, ov err) and noted where above 5e-2, never flagged.

The JSON (--json, default bench/results/bf16_training.json):

    script, date, args, notes
    machine     cpu, logical_cpus, cpu_flags {avx512_bf16, amx_bf16, amx_tile}, rnnfast,
                rnnfast_isa, rnnfast_isas_supported, bf16_products_path, bf16_emulated,
                bf16_paths_timed, quantized_bf16_path, numpy, numpy_blas, torch, torch_blas,
                torch_mkldnn_available, torch_mkldnn_enabled, torch_autocast, openvino,
                openvino_config {f32, bf16}
    roofline    per thread count: {threads, float32: compare's roofline record, bf16:
                {matmul_gflops, torch_bf16_matmul_gflops, measured_matmul_gflops,
                matvec_bytes_per_s, weight_bytes_per_element, assumption}}
    rows        per mode, cell, shape and thread count: {mode ("train" | "infer"), cell, label
                ("TxBxDxH"), shape {T, B, D, H}, threads, flops, roofline_ms {float32, bf16,
                bf16_measured}, libs {library: {precision, median_ms, samples_ms,
                calls_per_repeat, gflops, roofline (the roofline_ms key it is set against),
                roofline_fraction}}, ratios {name: float, or null where a side did not run},
                guard {limit, versus, metric, errors {variant: {output: error}}, max_error
                {variant: error}, bf16_applied {variant: bool}, float32_agreement {peer:
                error}, flagged, reasons}, peer_errors {peer: {versus, errors, max_error}},
                bf16_paths {auto, others, quantized (infer)}, torch_autocast_output_dtype
                (train), openvino_runtime {f32, bf16: {inference_precision,
                sequence_runtime_precision, sequence_primitive}} (infer), others_cpus}
    flagged     [{mode, cell, label, threads, reasons}] of the rows the guard flagged
    targets     [{target, row, ratio, figure, goal, met}]

Libraries: train rnnfast_f32, rnnfast_bf16, rnnfast_bf16@<path>, torch_f32,
torch_autocast_bf16; infer rnnfast_f32, rnnfast_bf16, rnnfast_bf16@<path>,
rnnfast_quantized_bf16, openvino_f32, openvino_bf16 (RATIOS lists the ratios). Column "busy" is
the CPUs other processes used meanwhile: rows with busy > 0 are not to be trusted.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
from pathlib import Path

import numpy as np
import torch

import rnnfast
from bench import RESULTS
from bench._common import (
    BUSY_CPUS,
    WARMUP_S,
    cores_for,
    cpu_clock,
    cpu_model,
    log,
    numpy_blas_summary,
    others_cpus,
    pinned_to,
    reexec_without_blas_overrides,
    relative_error,
    text_table,
    thread_count,
    time_alternating,
    time_each,
    torch_blas,
    write_json,
)
from bench.peers.compare import onnx_peers
from bench.peers.compare.roofline import measure_roofline, roofline_seconds
from bench.peers.compare.runners import gated_runners, rnnfast_runners, torch_runners
from bench.peers.compare.shapes import (
    CELLS,
    PeerUnavailable,
    Problem,
    grads_named,
    label,
    make_problem,
    mode_flops,
    parse_cells,
    parse_shapes,
)
from rnnfast import _core, functional, precision
from rnnfast.nn.quantized.formats import QuantizedWeight
from rnnfast.precision import bf16_available

SHAPES = [(50, 32, 512, 512), (25, 64, 1024, 1024), (50, 64, 256, 256), (100, 16, 64, 128)]
QUICK_SHAPES = [(50, 32, 512, 512), (100, 16, 64, 128)]
MODES = ("train", "infer")
# what compare's runners call each mode
COMPARE_MODE = {"train": "train", "infer": "fwd_seq"}
PEERS = ("torch", "openvino")
GUARD_LIMIT = 5e-2  # ||bf16 - float32|| / ||float32||, per output: above it, a row is flagged
APPLIED_FLOOR = 1e-6  # below it (every output), bf16 was not applied: flagged too
FLOAT_AGREEMENT = 1e-3  # rnnfast float32 against a peer's float32, max|a - b| / max|b|
BF16_PEAK_FACTOR = 2.0  # bf16 matmul peak / float32's (VDPBF16PS: 2 products per lane)

NATIVE_PATHS = ("amx", "avx512_bf16")  # rnnfast's native bf16 products paths, best first
# per mode, its libraries: rnnfast_bf16 is the automatic bf16 products path; each other native
# path timed (--bf16-paths) adds "rnnfast_bf16@<path>" after it. A library whose name holds
# "bf16" multiplies in bf16, the others in float32
LIBS = {
    "train": ("rnnfast_f32", "rnnfast_bf16", "torch_f32", "torch_autocast_bf16"),
    "infer": (
        "rnnfast_f32",
        "rnnfast_bf16",
        "rnnfast_quantized_bf16",
        "openvino_f32",
        "openvino_bf16",
    ),
}
# peers' bf16 errors, reported (peer: its float32 twin); float32 agreement, flagged
PEER_BF16 = {"torch_autocast_bf16": "torch_f32", "openvino_bf16": "openvino_f32"}
FLOAT_PEERS = {"train": ("torch_f32",), "infer": ("openvino_f32",)}
# (name, numerator library, denominator library): numerator time / denominator time; each
# other native path's variant gets rnnfast_bf16's ratios too (path_ratios)
RATIOS = {
    "train": [
        ("bf16_vs_torch_autocast", "torch_autocast_bf16", "rnnfast_bf16"),
        ("bf16_vs_f32", "rnnfast_f32", "rnnfast_bf16"),
        ("bf16_vs_torch_f32", "torch_f32", "rnnfast_bf16"),
        ("f32_vs_torch_f32", "torch_f32", "rnnfast_f32"),
        ("torch_autocast_vs_torch_f32", "torch_f32", "torch_autocast_bf16"),
    ],
    "infer": [
        ("bf16_vs_openvino_bf16", "openvino_bf16", "rnnfast_bf16"),
        ("quantized_bf16_vs_openvino_bf16", "openvino_bf16", "rnnfast_quantized_bf16"),
        ("bf16_vs_f32", "rnnfast_f32", "rnnfast_bf16"),
        ("quantized_bf16_vs_f32", "rnnfast_f32", "rnnfast_quantized_bf16"),
        ("openvino_bf16_vs_openvino_f32", "openvino_f32", "openvino_bf16"),
    ],
}


def lib_precision(lib: str) -> str:
    return "bf16" if "bf16" in lib else "float32"


def path_lib(path: str) -> str:
    return f"rnnfast_bf16@{path}"


def path_ratios(mode: str, paths: list) -> list:
    """RATIOS[mode]'s ratios of rnnfast_bf16, for each other native bf16 path timed."""
    return [
        (name.replace("bf16_vs", f"bf16@{path}_vs", 1), num, path_lib(path))
        for path in paths
        for name, num, den in RATIOS[mode]
        if den == "rnnfast_bf16"
    ]


def guarded(lib: str) -> bool:
    """Whether the guard checks lib against rnnfast float32: every rnnfast bf16 variant."""
    return lib.startswith("rnnfast_") and lib_precision(lib) == "bf16"


# ----------------------------------------------------------------------------- the machine


def cpu_flags() -> dict:
    """Whether /proc/cpuinfo lists the bf16 features: avx512_bf16 (VDPBF16PS), amx_bf16."""
    flags = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.partition(":")[2].split())
                break
    return {f: f in flags for f in ("avx512_bf16", "amx_bf16", "amx_tile")}


def bf16_setup(emulate: bool) -> str:
    """The automatic bf16 products path ('amx', 'avx512_bf16'; 'emulated' where this CPU has
    none and --emulate asks for the software rounding); without --emulate on such a CPU, the
    script ends with the reason. --emulate changes nothing where the CPU has bf16 products."""
    if not bf16_available():
        if not emulate:
            raise SystemExit(
                f"bf16_training: this machine has no bf16 products: "
                f"{_core.bf16_unavailable_reason()} (--emulate runs the software rounding, "
                "for a smoke run only: it is slower than float32)"
            )
        _core.set_bf16_emulation(True)
    return _core.bf16_products_path()


def native_paths() -> list:
    """The native bf16 products paths this CPU runs that rnnfast can be told to take
    (_core.set_bf16_path, where this build has it; none under emulation), NATIVE_PATHS' order."""
    if not hasattr(_core, "set_bf16_path") or _core.bf16_emulation():
        return []
    found = []
    for path in NATIVE_PATHS:
        try:
            _core.set_bf16_path(path)
            if _core.bf16_products_path() == path:
                found.append(path)
        except (ValueError, RuntimeError):  # not a path this CPU runs
            pass
        finally:
            _core.set_bf16_path("")
    return found


def other_paths(wanted: str, auto: str) -> list:
    """--bf16-paths: the native paths to time besides the automatic one."""
    runs = native_paths()
    if wanted == "auto":
        return []
    names = runs if wanted == "all" else [n.strip() for n in wanted.split(",") if n.strip()]
    unknown = [n for n in names if n not in runs]
    if unknown:
        raise SystemExit(
            f"--bf16-paths: expected 'all', 'auto' or some of the paths this CPU and build "
            f"run ({', '.join(runs) or 'none'}), got {', '.join(unknown)}"
        )
    return [n for n in names if n != auto]


def machine_info(args, path: str) -> dict:
    return {
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpu_flags": cpu_flags(),
        "rnnfast": rnnfast.__version__,
        "rnnfast_isa": _core.active_isa(),
        "rnnfast_isas_supported": _core.supported_isas(),
        "bf16_products_path": path,
        "bf16_emulated": path == "emulated",
        "bf16_paths_timed": [path, *args.other_paths],
        "quantized_bf16_path": _core.quantized_path("bf16"),
        "numpy": np.__version__,
        "numpy_blas": numpy_blas_summary(),
        "torch": torch.__version__,
        "torch_blas": torch_blas(),
        "torch_mkldnn_available": torch.backends.mkldnn.is_available(),
        "torch_mkldnn_enabled": bool(torch.backends.mkldnn.enabled),
        "torch_autocast": "torch.autocast('cpu', dtype=torch.bfloat16) around the forward",
        "openvino": onnx_peers.openvino_version() if "openvino" not in args.skip else None,
        "openvino_config": {
            p: {**onnx_peers.openvino_config(0, p), "INFERENCE_NUM_THREADS": "the row's threads"}
            for p in ("f32", "bf16")
        },
    }


def print_header(info: dict, args) -> None:
    flags = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in info["cpu_flags"].items())
    print(f"cpu: {info['cpu']}; {info['logical_cpus']} logical CPUs; {flags}")
    emulated = (
        " (EMULATED: --emulate on a CPU without bf16 products; times are not bf16's)"
        if info["bf16_emulated"]
        else ""
    )
    print(
        f"rnnfast {info['rnnfast']}: isa {info['rnnfast_isa']} (this cpu runs "
        f"{', '.join(info['rnnfast_isas_supported'])}); bf16 products path "
        f"{info['bf16_products_path']}{emulated} (also timed: "
        f"{', '.join(args.other_paths) or 'none'}); rnnfast.quantize bf16 path "
        f"{info['quantized_bf16_path']}"
    )
    print(
        f"torch {info['torch']} ({info['torch_blas']}; oneDNN available "
        f"{info['torch_mkldnn_available']}, enabled {info['torch_mkldnn_enabled']}); autocast: "
        f"{info['torch_autocast']}"
    )
    if info["openvino"]:
        cfg = onnx_peers.openvino_config("n", "bf16")
        print(
            f"openvino {info['openvino']}: CPU plugin, "
            + ", ".join(f"{k}={v}" for k, v in cfg.items() if k != "INFERENCE_PRECISION_HINT")
            + " (n = the row's threads), INFERENCE_PRECISION_HINT f32 and bf16"
        )
    else:
        print(
            "openvino: not run (" + ("--skip" if "openvino" in args.skip else "not installed") + ")"
        )
    print(f"numpy BLAS: {info['numpy_blas']}")
    print(
        f"threads {','.join(map(str, args.threads))}: every library on the first n cores "
        f"({', '.join(str(cores_for(n)) for n in args.threads)}), this process pinned there; "
        f"repeats {args.repeats} of >= {args.min_repeat_s * 1e3:g} ms, warm-up "
        f"{args.warmup_s * 1e3:g} ms"
    )


# ----------------------------------------------------------------------------- roofline


def roofline(threads: int, repeats: int) -> dict:
    """compare's float32 roofline at this thread count and two bf16 ones: "bf16", the
    VDPBF16PS bound (BF16_PEAK_FACTOR x the float32 matmul rate), and "bf16_measured", the
    faster of that and torch's bf16 matmul measured here (oneDNN; AMX where the CPU has it),
    the bound of what runs on AMX. Both read W_hh as bf16 at the float32 matvec bandwidth."""
    f32 = measure_roofline(np.float32, threads, repeats)
    n = f32["matmul_n"]
    a, b = (torch.randn(n, n, dtype=torch.bfloat16) for _ in range(2))
    with thread_count(threads):
        t = time_each({"torch": lambda: torch.matmul(a, b)}, repeats, 0.0)["torch"]
    measured = 2 * n**3 / t["median_s"] / 1e9
    bf16 = {
        "matmul_gflops": BF16_PEAK_FACTOR * f32["matmul_gflops"],
        "torch_bf16_matmul_gflops": measured,
        "measured_matmul_gflops": max(measured, BF16_PEAK_FACTOR * f32["matmul_gflops"]),
        "matvec_bytes_per_s": f32["matvec_bytes_per_s"],
        "weight_bytes_per_element": 2,
        "assumption": (
            f"bf16: matmul peak = {BF16_PEAK_FACTOR:g} x the float32 rate (VDPBF16PS: two "
            "bf16 multiply-adds per 32-bit lane per instruction, assumed at the FMA's issue "
            "rate); bf16_measured (what runs on AMX): the faster of that and torch's bf16 "
            f"matmul at {n}^3; W_hh read as bf16 (2 bytes a weight) at the float32 matvec "
            "bandwidth"
        ),
    }
    return {"threads": threads, "float32": f32, "bf16": bf16}


def roofline_ms(p: Problem, mode: str, roof: dict) -> dict:
    """The row's bounds in ms: float32 (compare's), bf16 (VDPBF16PS), bf16_measured (AMX)."""
    cm = COMPARE_MODE[mode]
    bf = roof["bf16"]
    weights = p.T * p.w_hh.size * bf["weight_bytes_per_element"] / bf["matvec_bytes_per_s"]
    out = {"float32": roofline_seconds(p, cm, roof["float32"]) * 1e3}
    for key, rate in (("bf16", "matmul_gflops"), ("bf16_measured", "measured_matmul_gflops")):
        out[key] = max(mode_flops(p, cm) / (bf[rate] * 1e9), weights) * 1e3
    return out


def bound_of(lib: str, paths: dict, amx_cpu: bool) -> str:
    """Which roofline_ms bound a library is set against: float32's; for bf16, bf16_measured
    where it runs on AMX (rnnfast on its "amx" path, a peer's oneDNN on an AMX CPU), else the
    VDPBF16PS one."""
    if lib_precision(lib) == "float32":
        return "float32"
    if lib.startswith("rnnfast_"):
        path = lib.partition("@")[2] or paths.get("quantized" if "quantized" in lib else "auto")
        return "bf16_measured" if path == "amx" else "bf16"
    return "bf16_measured" if amx_cpu else "bf16"


def print_roofline(roof: dict) -> None:
    f32, bf = roof["float32"], roof["bf16"]
    print(
        f"roofline threads={roof['threads']}: float32 matmul {f32['matmul_gflops']:.1f} GFLOP/s "
        f"({f32['matmul_from']}), matvec {f32['matvec_bytes_per_s'] / 1e9:.1f} GB/s "
        f"({f32['matvec_from']}); bf16 (VDPBF16PS) {bf['matmul_gflops']:.1f} GFLOP/s (assumed "
        f"{BF16_PEAK_FACTOR:g}x float32); bf16 measured (AMX) "
        f"{bf['measured_matmul_gflops']:.1f} GFLOP/s (torch bf16 matmul "
        f"{bf['torch_bf16_matmul_gflops']:.1f})"
    )


# ----------------------------------------------------------------------------- runners


def in_bf16(fn):
    """fn run with this thread's float32 kernel calls on bf16 products."""

    def run():
        with precision.products("bf16"):
            return fn()

    return run


def on_path(fn, path: str):
    """fn run on one native bf16 products path (_core.set_bf16_path), the automatic choice
    restored after each call, so that the paths can alternate."""

    def run():
        _core.set_bf16_path(path)
        try:
            return fn()
        finally:
            _core.set_bf16_path("")

    return run


def states_named(p: Problem, *states) -> dict:
    return dict(zip(p.cell.states, states))


def quantized_bf16_runner(p: Problem):
    """rnnfast.quantize's bf16 inference: the weights quantized as it stores them, the forward
    of every h_t on its kernels."""
    if not p.cell.gated:
        w_ih, w_hh = (QuantizedWeight.from_float("bf16", w).packed for w in (p.w_ih, p.w_hh))
        bias = (p.b_ih + p.b_hh).astype(np.float32)

        def run():
            return functional.quantized_rnn_forward(p.x, w_ih, w_hh, bias)

        return run, lambda r: {"y": r[0], "h_n": r[1]}
    rows, gates = p.w_ih.shape[0], p.cell.gates
    w_ih, w_hh = (
        QuantizedWeight.from_float("bf16", w).packed_rows(0, rows, gates) for w in (p.w_ih, p.w_hh)
    )

    def run_gated():
        return functional.quantized_gated_forward(p.cell.name, p.x, w_ih, w_hh, p.b_ih, p.b_hh)

    return run_gated, lambda out: {"y": out.y, **states_named(p, out.h_n, out.c_n)}


def torch_autocast_runner(p: Problem):
    """torch's training step with the forward under torch.autocast bf16 (the backward of
    y.float().sum() outside it); the raw result also gives y's dtype under autocast."""
    m = p.module
    x = torch.from_numpy(p.x).clone().requires_grad_(True)
    params = [m.weight_ih_l0, m.weight_hh_l0, m.bias_ih_l0, m.bias_hh_l0]

    def run():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y, _ = m(x)
        return y.dtype, torch.autograd.grad(y.float().sum(), [x, *params])

    return run, lambda r: grads_named(*(t.numpy() for t in r[1]))


def runners(p: Problem, mode: str, threads: int, args, notes: list) -> dict:
    """{library: (run, named)} of one mode, in LIBS' order with the other bf16 paths after
    rnnfast_bf16; a peer that cannot run is left out with a note."""
    cm = COMPARE_MODE[mode]
    skip = args.skip
    mine = (gated_runners(p, functional) if p.cell.gated else rnnfast_runners(p))[cm]
    out = {"rnnfast_f32": mine, "rnnfast_bf16": (in_bf16(mine[0]), mine[1])}
    for path in args.other_paths:
        out[path_lib(path)] = (on_path(in_bf16(mine[0]), path), mine[1])
    if mode == "train":
        if "torch" not in skip:
            out["torch_f32"] = torch_runners(p)["train"]
            out["torch_autocast_bf16"] = torch_autocast_runner(p)
        return out
    out["rnnfast_quantized_bf16"] = quantized_bf16_runner(p)
    if "openvino" not in skip:
        try:
            for prec in ("f32", "bf16"):
                out[f"openvino_{prec}"] = onnx_peers.openvino_runners(p, threads, prec)["fwd_seq"]
        except PeerUnavailable as exc:
            note = str(exc)
            if note not in notes:
                notes.append(note)
                log(note)
    return out


def openvino_runtime(p: Problem, threads: int, prec: str) -> dict:
    """What OpenVINO's CPU plugin made of the fwd_seq graph at this precision hint: the
    compiled model's precision and the sequence node's runtime precision and primitive."""
    core = onnx_peers.openvino_core()
    model = onnx_peers.onnx_model(p, with_sequences=True).SerializeToString()
    read = core.read_model(model, onnx_peers.openvino.Tensor(np.empty(0, np.uint8)))
    compiled = core.compile_model(read, "CPU", onnx_peers.openvino_config(threads, prec))
    hint = compiled.get_property("INFERENCE_PRECISION_HINT")
    info = {
        "inference_precision": hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
    }
    for op in compiled.get_runtime_model().get_ops():
        rt = op.get_rt_info()
        if "layerType" in rt and rt["layerType"].astype(str) == "RNNSeq":
            info["sequence_runtime_precision"] = rt["runtimePrecision"].astype(str)
            info["sequence_primitive"] = rt["primitiveType"].astype(str)
    return info


# ----------------------------------------------------------------------------- the guard


def norm_error(a, b) -> float:
    """||a - b|| / ||b|| (Frobenius, float64); infinite where the shapes differ."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.linalg.norm(a - b) / max(float(np.linalg.norm(b)), 1e-30))


def errors_against(named: dict, ref: dict, metric=norm_error) -> dict:
    return {k: metric(named[k], ref[k]) for k in named.keys() & ref.keys()}


def guard(mode: str, named: dict) -> tuple[dict, dict]:
    """(the guard, the peers' bf16 errors) of one row, from each library's named outputs."""
    ref = named["rnnfast_f32"]
    errors = {v: errors_against(named[v], ref) for v in named if guarded(v)}
    worst = {v: max(e.values(), default=0.0) for v, e in errors.items()}
    applied = {v: w > APPLIED_FLOOR for v, w in worst.items()}
    agreement = {
        peer: max(errors_against(ref, named[peer], relative_error).values(), default=0.0)
        for peer in FLOAT_PEERS[mode]
        if peer in named
    }
    reasons = [
        f"{v}: relative error {w:.3g} > {GUARD_LIMIT:g}"
        for v, w in worst.items()
        if not w <= GUARD_LIMIT  # NaN too
    ]
    reasons += [f"{v}: equal to float32 (bf16 not applied)" for v, a in applied.items() if not a]
    reasons += [
        f"rnnfast_f32 vs {peer}: max relative difference {d:.3g} > {FLOAT_AGREEMENT:g}"
        for peer, d in agreement.items()
        if not d <= FLOAT_AGREEMENT
    ]
    peers = {}
    for peer, twin in PEER_BF16.items():
        if peer in named and twin in named:
            e = errors_against(named[peer], named[twin])
            peers[peer] = {"versus": twin, "errors": e, "max_error": max(e.values(), default=0.0)}
    row_guard = {
        "limit": GUARD_LIMIT,
        "versus": "rnnfast_f32",
        "metric": "||bf16 - float32|| / ||float32|| per output",
        "errors": errors,
        "max_error": worst,
        "bf16_applied": applied,
        "float32_agreement": agreement,
        "flagged": bool(reasons),
        "reasons": reasons,
    }
    return row_guard, peers


# ----------------------------------------------------------------------------- one row


def bench_row(p: Problem, mode: str, threads: int, roof: dict, args, notes: list) -> dict:
    """Check, then time, one cell, shape, thread count and mode, on the row's cores."""
    since = cpu_clock()
    with thread_count(threads), pinned_to(cores_for(threads)):
        found = runners(p, mode, threads, args, notes)
        raw = {lib: run() for lib, (run, _) in found.items()}  # also their first warm-up
        named = {lib: found[lib][1](r) for lib, r in raw.items()}
        row_guard, peer_errors = guard(mode, named)
        if row_guard["flagged"]:
            log(f"  FLAGGED: {'; '.join(row_guard['reasons'])}")
        extra = {"bf16_paths": {"auto": args.auto_path, "others": args.other_paths}}
        if mode == "infer":
            extra["bf16_paths"]["quantized"] = _core.quantized_path("bf16")
        if "torch_autocast_bf16" in raw:
            extra["torch_autocast_output_dtype"] = str(raw["torch_autocast_bf16"][0])
        if "openvino_bf16" in found:
            extra["openvino_runtime"] = {
                prec: openvino_runtime(p, threads, prec) for prec in ("f32", "bf16")
            }
        del raw, named
        _core.clear_contention_backoff()
        mine = {lib: run for lib, (run, _) in found.items() if lib.startswith("rnnfast")}
        timed = time_alternating(mine, args.repeats, args.min_repeat_s, args.warmup_s)
        for lib, (run, _) in found.items():
            if lib not in timed:
                timed.update(time_each({lib: run}, args.repeats, args.min_repeat_s, args.warmup_s))
        if threads > 1 and _core.contention_backoff_seconds() > 0:
            notes.append(
                f"{mode} {p.cell.name} {p.label} at {threads} threads: rnnfast's contention "
                "back-off started (busy machine); its timing is partly 1-thread"
            )
        del found
    return make_row(p, mode, threads, timed, roof, row_guard, peer_errors, extra, since)


def make_row(p, mode, threads, timed, roof, row_guard, peer_errors, extra, since) -> dict:
    flops = mode_flops(p, COMPARE_MODE[mode])
    bound = roofline_ms(p, mode, roof)
    libs = {}
    amx_cpu = cpu_flags()["amx_bf16"]
    for lib, t in timed.items():
        prec, bound_key = lib_precision(lib), bound_of(lib, extra["bf16_paths"], amx_cpu)
        libs[lib] = {
            "precision": prec,
            "median_ms": t["median_s"] * 1e3,
            "samples_ms": [s * 1e3 for s in t["samples_s"]],
            "calls_per_repeat": t["inner"],
            "gflops": flops / t["median_s"] / 1e9,
            "roofline": bound_key,
            "roofline_fraction": bound[bound_key] / (t["median_s"] * 1e3),
        }
    ratios = {
        name: (libs[a]["median_ms"] / libs[b]["median_ms"] if a in libs and b in libs else None)
        for name, a, b in RATIOS[mode] + path_ratios(mode, extra["bf16_paths"]["others"])
    }
    return {
        "mode": mode,
        "cell": p.cell.name,
        "label": p.label,
        "shape": dict(zip("TBDH", p.shape)),
        "threads": threads,
        "flops": flops,
        "roofline_ms": bound,
        "libs": libs,
        "ratios": ratios,
        "guard": row_guard,
        "peer_errors": peer_errors,
        **extra,
        "others_cpus": others_cpus(since),
    }


def peer_error_notes(rows: list) -> list:
    """A note per peer whose bf16 results stray from its own float32 by more than the guard's
    limit on some rows (never flagged: the guard is rnnfast's; its times are then a wrong
    result's)."""
    out = []
    for peer in PEER_BF16:
        bad = [
            f"{r['mode']} {r['cell']} {r['label']} {r['threads']}t "
            + ", ".join(
                f"{k} {e:.2g}"
                for k, e in sorted(r["peer_errors"][peer]["errors"].items())
                if e > GUARD_LIMIT
            )
            for r in rows
            if peer in r["peer_errors"] and r["peer_errors"][peer]["max_error"] > GUARD_LIMIT
        ]
        if bad:
            out.append(
                f"{peer}'s results are off its float32 twin ({PEER_BF16[peer]}) by more than "
                f"{GUARD_LIMIT:g} (||bf16 - f32|| / ||f32||) on {len(bad)} row(s), its times "
                f"there are a wrong result's: {'; '.join(bad)}"
            )
    return out


# ----------------------------------------------------------------------------- targets, tables


PATH_GOALS = {"amx": 3.0, "avx512_bf16": 1.7}  # training bf16 / float32 at H >= 512, per path


def targets(rows: list, info: dict) -> list:
    """The issue's speed targets per row: {"target", "row", "ratio", "figure", "goal", "met"}.
    The float32 multiple is set per bf16 products path timed (PATH_GOALS); on a CPU with
    AMX-BF16 where no timed path was AMX, the automatic path is held to AMX's goal."""
    if info["bf16_emulated"]:
        return []
    auto, amx = info["bf16_products_path"], info["cpu_flags"]["amx_bf16"]
    out = []

    def check(text, r, name, goal):
        figure = r["ratios"].get(name)
        if figure is not None:
            where = f"{r['mode']} {r['cell']} {r['label']} {r['threads']}t"
            out.append(
                {
                    "target": text,
                    "row": where,
                    "ratio": name,
                    "figure": figure,
                    "goal": goal,
                    "met": figure >= goal,
                }
            )

    for r in rows:
        if r["mode"] == "infer":
            check(
                "inference: rnnfast bf16 (products) >= 1.2x OpenVINO bf16",
                r,
                "bf16_vs_openvino_bf16",
                1.2,
            )
            check(
                "inference: rnnfast.quantize bf16 >= 1.2x OpenVINO bf16",
                r,
                "quantized_bf16_vs_openvino_bf16",
                1.2,
            )
            continue
        check(
            "training: rnnfast bf16 >= 1.25x torch autocast bf16", r, "bf16_vs_torch_autocast", 1.25
        )
        if r["shape"]["H"] < 512:
            continue
        paths = {"bf16_vs_f32": auto}
        paths |= {f"bf16@{p}_vs_f32": p for p in r["bf16_paths"]["others"]}
        for name, path in paths.items():
            if path in PATH_GOALS:
                goal = PATH_GOALS[path]
                check(
                    f"training: rnnfast bf16 on {path} >= {goal:g}x rnnfast float32 at H >= 512",
                    r,
                    name,
                    goal,
                )
        if amx and "amx" not in paths.values():
            check(
                f"training: rnnfast bf16 >= 3x rnnfast float32 at H >= 512 (the CPU has "
                f"AMX-BF16; the bf16 products ran on {auto})",
                r,
                "bf16_vs_f32",
                3.0,
            )
    return out


def ms(lib):
    return lambda r: f"{r['libs'][lib]['median_ms']:.3f}" if lib in r["libs"] else "-"


def ratio(name):
    return lambda r: "-" if r["ratios"][name] is None else f"{r['ratios'][name]:.2f}x"


def roof_share(lib):
    return lambda r: (
        f"{100 * r['libs'][lib]['roofline_fraction']:.0f}%" if lib in r["libs"] else "-"
    )


def worst_error(r):
    return max(r["guard"]["max_error"].values(), default=0.0)


def peer_error(lib):
    return lambda r: f"{r['peer_errors'][lib]['max_error']:.1e}" if lib in r["peer_errors"] else "-"


HEAD = [("cell", "<5", lambda r: r["cell"]), ("shape", "<16", lambda r: r["label"])]
TAIL = [
    ("f32 roof", ">9", lambda r: f"{r['roofline_ms']['float32']:.3f}"),
    ("bf16 roof", ">9", lambda r: f"{r['roofline_ms'][r['libs']['rnnfast_bf16']['roofline']]:.3f}"),
    ("bf16 %roof", ">10", roof_share("rnnfast_bf16")),
    ("bf16 err", ">8", lambda r: f"{worst_error(r):.1e}"),
]
FLAG = [
    ("busy", ">5", lambda r: f"{r['others_cpus']:.1f}"),
    ("guard", "<7", lambda r: "FLAGGED" if r["guard"]["flagged"] else "ok"),
]


def columns(mode: str, others: list) -> list:
    """The table's columns of a mode: each other bf16 path's time and ratio to float32 after
    the automatic path's."""
    paths = [(f"@{p} ms", ">10", ms(path_lib(p))) for p in others]
    path_x = [(f"@{p} x", ">7", ratio(f"bf16@{p}_vs_f32")) for p in others]
    rn = [("rn f32 ms", ">10", ms("rnnfast_f32")), ("rn bf16 ms", ">10", ms("rnnfast_bf16"))]
    if mode == "train":
        return [
            *HEAD,
            *rn,
            *paths,
            ("t f32 ms", ">10", ms("torch_f32")),
            ("t ac ms", ">10", ms("torch_autocast_bf16")),
            ("vs f32", ">7", ratio("bf16_vs_f32")),
            *path_x,
            ("vs t-ac", ">7", ratio("bf16_vs_torch_autocast")),
            ("vs t-f32", ">8", ratio("bf16_vs_torch_f32")),
            *TAIL,
            ("t-ac err", ">8", peer_error("torch_autocast_bf16")),
            *FLAG,
        ]
    return [
        *HEAD,
        *rn,
        *paths,
        ("rn q-bf16", ">10", ms("rnnfast_quantized_bf16")),
        ("ov f32 ms", ">10", ms("openvino_f32")),
        ("ov bf16 ms", ">10", ms("openvino_bf16")),
        ("vs f32", ">7", ratio("bf16_vs_f32")),
        *path_x,
        ("vs ov-bf", ">8", ratio("bf16_vs_openvino_bf16")),
        ("q vs ov", ">8", ratio("quantized_bf16_vs_openvino_bf16")),
        *TAIL,
        ("ov err", ">8", peer_error("openvino_bf16")),
        *FLAG,
    ]


LEGEND = {
    "train": (
        "training step (forward + full backward): rn = rnnfast.functional float32 / under "
        "products('bf16'); t f32 = torch.nn float32, t ac = torch autocast bf16; vs X = X's "
        "time / rnnfast bf16's; @<path> = rnnfast bf16 on that other native path; roof = the roofline's ms (bf16 roof: rnnfast bf16's, the AMX "
        "one measured where it ran on AMX, else VDPBF16PS's, assumed 2x the float32 peak); "
        "bf16 err = worst ||bf16 - f32|| / ||f32|| of rnnfast's outputs and gradients; t-ac err "
        "= torch autocast's against torch float32"
    ),
    "infer": (
        "inference (forward returning every h_t): rn bf16 = float32 layer under "
        "products('bf16'), rn q-bf16 = rnnfast.quantize's bf16 weights; ov = OpenVINO CPU "
        "plugin, INFERENCE_PRECISION_HINT f32 / bf16; vs X = X's time / rnnfast's; ov err = "
        "OpenVINO bf16 against OpenVINO f32"
    ),
}


def print_report(rows, roofs, found, notes) -> None:
    for mode in MODES:
        for threads, roof in roofs.items():
            group = [r for r in rows if r["mode"] == mode and r["threads"] == threads]
            if not group:
                continue
            print()
            print_roofline(roof)
            print(f"{LEGEND[mode]}; threads={threads}")
            print(text_table(columns(mode, group[0]["bf16_paths"]["others"]), group))
    flagged = [r for r in rows if r["guard"]["flagged"]]
    print()
    print(
        f"correctness guard: {len(rows) - len(flagged)} of {len(rows)} rows ok (rnnfast bf16 "
        f"within {GUARD_LIMIT:g} of float32, bf16 applied, float32 agreeing with the peers)"
    )
    for r in flagged:
        print(
            f"  FLAGGED {r['mode']} {r['cell']} {r['label']} {r['threads']}t: "
            + "; ".join(r["guard"]["reasons"])
        )
    print("targets (figure vs goal; reported, not asserted)")
    if not found:
        print("  none evaluated" + (": bf16 products emulated" if rows else ""))
    groups = {}
    for t in found:  # per target and thread count (a row's name ends with its "<n>t")
        groups.setdefault((t["target"], t["row"].rsplit(" ", 1)[1]), []).append(t)
    for (target, threads), checks in groups.items():
        met = sum(c["met"] for c in checks)
        worst = min(checks, key=lambda c: c["figure"])
        print(
            f"  [{'MET' if met == len(checks) else 'MISSED':>6}] {target}, {threads}: "
            f"{met}/{len(checks)} rows; worst {worst['figure']:.2f}x (goal {worst['goal']:g}x) "
            f"at {worst['row']}"
        )
        for c in checks:
            if not c["met"]:
                print(f"           missed: {c['row']} {c['figure']:.2f}x")
    for note in notes:
        print(f"note: {note}")


# ----------------------------------------------------------------------------- command line


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m bench.kernels.bf16_training", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: shapes {','.join(map(label, QUICK_SHAPES))}, 3 repeats of "
        ">= 20 ms, 0.1 s warm-ups",
    )
    ap.add_argument(
        "--shapes",
        default=None,
        help=f"comma-separated TxBxDxH (default: {','.join(map(label, SHAPES))})",
    )
    ap.add_argument("--cells", default=",".join(CELLS), help="some of rnn,gru,lstm (default all)")
    ap.add_argument("--modes", default=",".join(MODES), help="some of train,infer (default both)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--skip", default="", help=f"peers to leave out, some of {','.join(PEERS)}")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats (default 7; quick 3)")
    ap.add_argument(
        "--min-repeat-s",
        type=float,
        default=None,
        help="a repeat loops over calls for at least this long (default 0.1; quick 0.02)",
    )
    ap.add_argument(
        "--warmup-s",
        type=float,
        default=None,
        help=f"each library runs this long first (default {WARMUP_S:g}; quick 0.1)",
    )
    ap.add_argument(
        "--bf16-paths",
        default="all",
        help="rnnfast's native bf16 products paths to time: 'all' (default: each one this CPU "
        "and build run, side by side, e.g. amx and avx512_bf16), 'auto' (the automatic one "
        "only) or some of " + ",".join(NATIVE_PATHS),
    )
    ap.add_argument(
        "--roofline-repeats", type=int, default=3, help="repeats of the roofline's rates (3)"
    )
    ap.add_argument(
        "--emulate",
        action="store_true",
        help="where this CPU has no bf16 products, run rnnfast's software rounding "
        "(_core.set_bf16_emulation; smoke runs only: slower than float32)",
    )
    ap.add_argument(
        "--json",
        type=Path,
        default=RESULTS / "bf16_training.json",
        help="where the JSON goes (default bench/results/bf16_training.json)",
    )
    args = ap.parse_args(argv)
    args.repeats = args.repeats or (3 if args.quick else 7)
    if args.min_repeat_s is None:
        args.min_repeat_s = 0.02 if args.quick else 0.1
    if args.warmup_s is None:
        args.warmup_s = 0.1 if args.quick else WARMUP_S
    try:
        args.shapes = (
            parse_shapes(args.shapes) if args.shapes else (QUICK_SHAPES if args.quick else SHAPES)
        )
        args.cells = parse_cells(args.cells)
        args.threads = [int(t) for t in args.threads.split(",")]
    except ValueError as exc:
        ap.error(str(exc))
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    args.skip = [s.strip() for s in args.skip.split(",") if s.strip()]
    if not args.modes or any(m not in MODES for m in args.modes):
        ap.error(f"--modes: expected some of {','.join(MODES)}")
    if any(s not in PEERS for s in args.skip):
        ap.error(f"--skip: expected some of {','.join(PEERS)}")
    if args.repeats < 1 or min(args.threads) < 1 or args.roofline_repeats < 1:
        ap.error("--repeats, --threads and --roofline-repeats must be >= 1")
    if onnx_peers.openvino is None and "openvino" not in args.skip:
        args.skip.append("openvino")
        args.openvino_missing = True
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    emulation_before = _core.bf16_emulation()
    path = bf16_setup(args.emulate)
    try:
        args.auto_path, args.other_paths = path, other_paths(args.bf16_paths, path)
        return run(args, path)
    finally:
        _core.set_bf16_emulation(emulation_before)


def run(args, path: str) -> dict:
    info = machine_info(args, path)
    print_header(info, args)
    notes = []
    if getattr(args, "openvino_missing", False):
        notes.append("OpenVINO skipped: the openvino package is not installed")
    if max(args.threads) > len(os.sched_getaffinity(0)):
        notes.append(f"more threads than the {len(os.sched_getaffinity(0))} CPUs this process has")
    since = cpu_clock()
    roofs = {}
    for n in args.threads:
        with pinned_to(cores_for(n)):
            roofs[n] = roofline(n, args.roofline_repeats)
    if others_cpus(since) >= BUSY_CPUS:
        notes.append(f"other processes kept {others_cpus(since):.1f} CPUs busy during the roofline")
    rows = []
    for shape in args.shapes:
        for cell in args.cells:
            p = make_problem(shape, np.float32, cell=cell)
            for n in args.threads:
                for mode in args.modes:
                    log(f"{mode} {cell} {p.label} threads={n} ...")
                    rows.append(bench_row(p, mode, n, roofs[n], args, notes))
    notes += peer_error_notes(rows)
    busy = [r for r in rows if r["others_cpus"] >= BUSY_CPUS]
    if busy:
        notes.append(
            f"other processes kept CPUs busy (column busy, up to "
            f"{max(r['others_cpus'] for r in busy):.1f}) during {len(busy)} of {len(rows)} rows: "
            "those timings are disturbed; rerun on an idle machine"
        )
    found = targets(rows, info)
    print_report(rows, roofs, found, notes)
    doc = {
        "script": "bench.kernels.bf16_training",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": info,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "roofline": list(roofs.values()),
        "rows": rows,
        "flagged": [
            {
                "mode": r["mode"],
                "cell": r["cell"],
                "label": r["label"],
                "threads": r["threads"],
                "reasons": r["guard"]["reasons"],
            }
            for r in rows
            if r["guard"]["flagged"]
        ],
        "targets": found,
        "notes": notes,
    }
    write_json(args.json, doc)
    return doc


if __name__ == "__main__":
    reexec_without_blas_overrides()
    main()
