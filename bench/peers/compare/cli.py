"""Speed of rnnfast against torch.nn.RNN, ONNX Runtime's RNN operator, the NumPy reference loop and
an unfused BLAS anchor, each row set against the machine's roofline and issue 13's targets.

Run from the repository root:

    python -m bench.peers.compare           # issue 3's grid and the EXTRA shapes, threads 1
                                            # and 2, float32 and float64, rnnfast on each ISA
                                            # above baseline
    python -m bench.peers.compare --quick   # smoke run: 4 shapes (2 in float64), 3 short repeats
    python -m bench.peers.compare --shapes 200x1x32x64,50x32x512x512 --threads 1 --dtype float32
    python -m bench.peers.compare --extra none --isas none     # the grid only, the active ISA only

How long it takes, on the 2-core VM of issue 13 (Intel Xeon, AVX-512), which other sessions shared
throughout: the default run (12 shapes x 2 dtypes x 2 thread counts x 3 modes = 144 rows; 5
repeats of >= 20 ms after 0.25 s warm-ups) took 52 minutes while others kept 1.5-1.7 of the 2 CPUs
busy, and 26 minutes at 0.6-1.7 (median 1.0). The 1-thread blocks took about 5 of those 26
minutes; the rest went to the 2-thread blocks, whose multi-threaded peers stall at their barriers
whenever another process holds a core (2-10x longer than at 1 thread). Idle, 2 threads run faster
than 1, which puts the whole run at about 10 minutes: an estimate, as the machine was never idle.
--quick took 1.7 minutes under that load (4.7 under the heavier one; about 40 s idle).

For each shape (T, B, D, H) and thread count it times three modes:

    fwd_seq   forward inference returning every h_t          (torch under no_grad, ORT: Y)
    fwd_last  forward inference returning only h_T           (rnnfast: return_sequences=False,
                                                              ORT: a graph with Y_h only)
    train     forward + backward of sum(y), i.e. dy = ones   (torch: autograd; no ORT)

in rnnfast and its peers: torch, ort (float32 only: ORT has no float64 RNN kernel), numpy
(rnnfast.reference, a NumPy loop over the steps) and blas, the anchor: the same GEMMs in the best
BLAS without fusion, through torch.matmul on MKL (runners.py says which).

Every library gets the same weights (the torch module's state_dict) and must agree with the others
before anything is timed; a disagreement aborts the run. Times are medians of --repeats repeats,
each library timed in turn after a warm-up of --warmup-ms (0.25 s; quick 0.1 s). rnnfast runs on its active ISA and on each
other ISA of --isas in the same process, its repeats alternating between the ISAs (column
"<isa> x" = rnnfast's time on that ISA / on the active one). The report gives milliseconds,
GFLOP/s (forward FLOPs = 2*T*B*(D*H + H*H), training = 3x), the speed-up of rnnfast over each
peer (peer_time / rnnfast_time), each row's fraction of the machine's roofline
(max(FLOPs / matmul rate, T * bytes(W_hh) / matvec bandwidth), each rate the faster of NumPy's
BLAS and torch's, measured in the same run at the same thread count; both are printed) and a
"targets" section (targets.py lists them), each target met or missed with its figure.
The header names the CPU (/proc/cpuinfo), the ISA rnnfast ran, NumPy's BLAS and the kernel it
chose (threadpoolctl) and torch's BLAS (torch.__config__); the JSON holds the same.
Column "busy" is the CPUs other processes used meanwhile: on a shared machine, rows with busy > 0
(above all the multi-threaded ones) are not to be trusted. Results go to
bench/results/compare.json and a chart of the speed-ups to bench/results/compare.png.

NumPy's OpenBLAS is slowed by OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE overrides that some machines set;
this script re-executes itself without them before it measures anything.

The parts, one job each, beside this file in bench/peers/compare/: shapes.py (the grid, the
extra shapes, the problems and their FLOPs), runners.py (one runner per library, the blas anchor
among them), roofline.py (the machine's matmul rate and bandwidth), measure.py (agreement,
timing, per-ISA timing, the result rows), targets.py (issue 13's targets), quantized.py (bf16 /
int8 rows on the float32 shapes, issue 16's targets; --no-quantized leaves them out) and
report.py (tables, JSON, chart); bench/_common.py holds what every bench script shares.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

import rnnfast
from bench import RESULTS
from bench._common import BUSY_CPUS, WARMUP_S, cpu_clock, others_cpus, reexec_without_blas_overrides
from bench.peers.compare.measure import bench_all, largest_difference, load_note
from bench.peers.compare.quantized import bench_quantized, print_quantized, quantized_targets
from bench.peers.compare.report import (
    plot_speedups,
    print_done,
    print_header,
    print_report,
    write_json,
)
from bench.peers.compare.roofline import measure_roofline, roofline_note
from bench.peers.compare.shapes import (
    EXTRA,
    GRID,
    QUICK_EXTRA,
    QUICK_GRID,
    make_problem,
    parse_shapes,
    work_list,
)
from bench.peers.compare.targets import evaluate_targets


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m bench.peers.compare", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 3 grid shapes and 1 extra (2 in float64), 3 repeats, short repeats",
    )
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats (default 5; quick 3)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument(
        "--shapes",
        default=None,
        help="comma-separated TxBxDxH (default: issue 3's grid; a shape need not be in it)",
    )
    ap.add_argument(
        "--extra",
        default=None,
        help="comma-separated TxBxDxH off the grid, run after --shapes, or 'none' (default: "
        "shapes.EXTRA, quick: QUICK_EXTRA; none when --shapes is given)",
    )
    ap.add_argument(
        "--dtype",
        default="default",
        choices=["default", "float32", "float64", "both"],
        help="default: float32 and float64 on every shape (quick: float64 on 2 of them)",
    )
    ap.add_argument(
        "--isas",
        default=None,
        help="comma-separated ISAs to time rnnfast on besides the active one, or 'none' "
        "(default: every ISA this CPU runs above baseline)",
    )
    ap.add_argument(
        "--min-repeat-ms",
        type=float,
        default=None,
        help="a repeat loops over calls for at least this long (default 20; quick 5)",
    )
    ap.add_argument(
        "--warmup-ms",
        type=float,
        default=None,
        help="each library runs this long before its repeats (default 250; quick 100)",
    )
    ap.add_argument(
        "--no-quantized",
        action="store_true",
        help="leave out the bf16 / int8 rows (quantized.py) run on the float32 shapes",
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "compare.json")
    ap.add_argument("--plot", type=Path, default=None, help="PNG path (default: --out with .png)")
    args = ap.parse_args(argv)
    args.repeats = args.repeats or (3 if args.quick else 5)
    args.min_repeat_s = (args.min_repeat_ms or (5 if args.quick else 20)) / 1e3
    args.warmup_s = (args.warmup_ms or (100 if args.quick else 1e3 * WARMUP_S)) / 1e3
    try:
        args.threads = [int(t) for t in args.threads.split(",")]
        shapes = parse_shapes(args.shapes) if args.shapes else (QUICK_GRID if args.quick else GRID)
        extra = extra_shapes(args)
        args.isas = parse_isas(args.isas)
    except ValueError as exc:
        ap.error(str(exc))
    args.shapes = list(dict.fromkeys(shapes + extra))
    args.plot = args.plot or args.out.with_suffix(".png")
    if args.repeats < 1 or min(args.threads) < 1:
        ap.error("--repeats and --threads must be >= 1")
    return args


def extra_shapes(args) -> list:
    """--extra's shapes: the default set unless --shapes names the shapes; 'none' for none."""
    if args.extra is None:
        return [] if args.shapes else (QUICK_EXTRA if args.quick else EXTRA)
    return [] if args.extra.lower() == "none" else parse_shapes(args.extra, "--extra")


def parse_isas(text) -> list:
    """--isas: names this CPU runs, checked; default every supported ISA above baseline."""
    supported = rnnfast._core.supported_isas()
    if text is None:
        return [isa for isa in supported if isa != "baseline"]
    if text.lower() == "none":
        return []
    names = [name.strip() for name in text.split(",")]
    unknown = [name for name in names if name not in supported]
    if unknown:
        raise ValueError(
            f"--isas: expected ISAs this CPU runs ({', '.join(supported)}), got {', '.join(unknown)}"
        )
    return names


def warn_if_busy() -> None:
    """Half a second of the machine's load before anything is measured."""
    since = cpu_clock()
    time.sleep(0.5)
    others = others_cpus(since)
    if others >= BUSY_CPUS:
        print(
            f"warning: other processes are using {others:.1f} of {os.cpu_count()} CPUs; "
            "timings will be disturbed"
        )


def main(argv=None) -> None:
    reexec_without_blas_overrides()
    args = parse_args(argv)
    work = work_list(args)
    dtypes = sorted({np.dtype(d).name for d, _ in work}, key=["float32", "float64"].index)
    print_header(args)
    warn_if_busy()
    since = cpu_clock()
    roofs = {
        (d, n): measure_roofline(d, n, max(3, args.repeats)) for d in dtypes for n in args.threads
    }
    roofline_others = others_cpus(since)
    notes = []
    rows, agreement = bench_all(work, args, roofs, notes)
    notes += [n for n in (load_note(rows, roofline_others), roofline_note(rows)) if n]
    quantized = []
    if not args.no_quantized:
        problems = [make_problem(shape, d) for d, shape in work if np.dtype(d) == np.float32]
        quantized = bench_quantized(problems, args.threads, rows, args)
    targets = evaluate_targets(rows) + quantized_targets(quantized)
    print_report(rows, roofs, targets, notes)
    print_quantized(quantized)
    write_json(args.out, args, rows, roofs, agreement, targets, notes, quantized)
    plot_speedups(args.plot, rows)
    print_done(largest_difference(agreement), args.out, args.plot)


if __name__ == "__main__":
    main()
