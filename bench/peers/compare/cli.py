"""Speed of rnnfast's Elman, GRU and LSTM layers against torch.nn.RNN / GRU / LSTM, ONNX Runtime's
and OpenVINO's RNN / GRU / LSTM operators, JAX (lax.scan under jit), the NumPy reference loop and an
unfused BLAS anchor, each row set against the machine's roofline and the targets of issues 13
(Elman) and 23 (GRU, LSTM).

Run from the repository root:

    python -m bench.peers.compare           # issue 3's grid and the EXTRA shapes, cells rnn, gru
                                            # and lstm, threads 1 and 2, float32 and float64,
                                            # rnnfast on each ISA above baseline
    python -m bench.peers.compare --quick   # smoke run: the Elman cell on 4 shapes, GRU and LSTM
                                            # on 2 (QUICK_GATED), float64 on 2; 3 short repeats
    python -m bench.peers.compare --shapes 200x1x32x64,50x32x512x512 --threads 1 --dtype float32
    python -m bench.peers.compare --extra none --isas none     # the grid only, the active ISA only
    python -m bench.peers.compare --cells gru,lstm --skip jax  # the gated cells, no JAX

How long it takes, on the 2-core VM of issue 13 (Intel Xeon, AVX-512), which other sessions shared
throughout, before the gated cells, OpenVINO and JAX joined: the Elman cell's run (12 shapes x 2
dtypes x 2 thread counts x 3 modes = 144 rows; 5
repeats of >= 20 ms after 0.25 s warm-ups) took 52 minutes while others kept 1.5-1.7 of the 2 CPUs
busy, and 26 minutes at 0.6-1.7 (median 1.0). The 1-thread blocks took about 5 of those 26
minutes; the rest went to the 2-thread blocks, whose multi-threaded peers stall at their barriers
whenever another process holds a core (2-10x longer than at 1 thread). Idle, 2 threads run faster
than 1, which puts the whole run at about 10 minutes: an estimate, as the machine was never idle.
--quick took 1.7 minutes under that load (4.7 under the heavier one; about 40 s idle).
The gated cells triple the rows (432 by default) and cost 3-4x the Elman cell's FLOPs each, and
every row now has two more peers (JAX compiles each cell, shape and mode once per thread count):
the default run is about 4-5x the Elman-only one, some 45 minutes idle (an estimate); --quick's
time is in bench/README.md.

For each cell (--cells: rnn, gru, lstm; PyTorch's equations, tanh), shape (T, B, D, H) and thread
count it times three modes:

    fwd_seq   forward inference returning every h_t          (torch under no_grad, ORT and
                                                              OpenVINO: Y and the last states)
    fwd_last  forward inference returning only h_T (and c_T) (rnnfast: return_sequences=False,
                                                              ORT and OpenVINO: a graph with the
                                                              last states only)
    train     forward + backward of sum(y), i.e. dy = ones   (rnnfast: the forward with
                                                              keep_workspace, then the backward;
                                                              torch: autograd; JAX: jax.vjp;
                                                              no ORT, no OpenVINO)

in rnnfast and its peers: torch, ort (float32 only: ORT has no float64 RNN, GRU or LSTM kernel),
openvino (its CPU plugin, float32 only, f32 precision asked for), jax (lax.scan under jit, in a
child process per thread count pinned to that many cores before jax is imported, since JAX
ignores thread flags; it times itself there), numpy (rnnfast.reference, a NumPy loop over the
steps) and blas, the anchor: the same GEMMs in the best BLAS without fusion, through torch.matmul
on MKL (forward and training for the Elman cell, forward only for the gated ones). runners.py
says what each does; a peer not installed (openvino, jax) or left out with --skip is absent from
the rows, with a note.

Every library gets the same weights (the torch module's state_dict) and must agree with the others
before anything is timed; a disagreement aborts the run. Times are medians of --repeats repeats,
each library timed in turn after a warm-up of --warmup-ms (0.25 s; quick 0.1 s). rnnfast runs on its active ISA and on each
other ISA of --isas in the same process, its repeats alternating between the ISAs (column
"<isa> x" = rnnfast's time on that ISA / on the active one). The report gives milliseconds,
GFLOP/s (forward FLOPs = 2*T*B*(D*H + H*H) x the cell's gate blocks: 1 Elman, 3 GRU, 4 LSTM;
training = 3x the forward), the speed-up of rnnfast over each
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
extra shapes, the cells, the problems and their FLOPs), runners.py (the runners of rnnfast, the
NumPy reference and torch, per cell, and all_runners, which gathers every library's), blas.py
(the unfused anchor), onnx_peers.py (the ONNX graphs, ORT and OpenVINO), jax_peer.py and
jax_worker.py (JAX's pinned child processes), roofline.py (the machine's matmul rate and
bandwidth), measure.py (agreement, timing, per-ISA timing, the result rows), targets.py (issues
13's and 23's targets), quantized.py (bf16 / int8 rows on the float32 Elman shapes, issue 16's
targets; --no-quantized leaves them out) and report.py (tables, JSON, chart); bench/_common.py
holds what every bench script shares.
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
from bench.peers.compare.jax_peer import JaxPeer
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
from bench.peers.compare.runners import PEERS
from bench.peers.compare.shapes import (
    CELLS,
    EXTRA,
    GRID,
    QUICK_EXTRA,
    QUICK_GATED,
    QUICK_GRID,
    make_problem,
    parse_cells,
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
        help="smoke run: 3 grid shapes and 1 extra (2 in float64), GRU and LSTM on 2 of them, "
        "3 repeats, short repeats",
    )
    ap.add_argument(
        "--cells",
        default=",".join(CELLS),
        help=f"comma-separated cells, some of {', '.join(CELLS)} (default all)",
    )
    ap.add_argument(
        "--skip",
        default="",
        help=f"comma-separated peers to leave out, some of {', '.join(PEERS)} (default none)",
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
    ap.add_argument("--no-plot", action="store_true", help="write no chart (the JSON only)")
    args = ap.parse_args(argv)
    args.repeats = args.repeats or (3 if args.quick else 5)
    args.min_repeat_s = (args.min_repeat_ms or (5 if args.quick else 20)) / 1e3
    args.warmup_s = (args.warmup_ms or (100 if args.quick else 1e3 * WARMUP_S)) / 1e3
    default_shapes = args.shapes is None and args.extra is None
    try:
        args.threads = [int(t) for t in args.threads.split(",")]
        shapes = parse_shapes(args.shapes) if args.shapes else (QUICK_GRID if args.quick else GRID)
        extra = extra_shapes(args)
        args.isas = parse_isas(args.isas)
        args.cells = parse_cells(args.cells)
        args.skip = parse_skip(args.skip)
    except ValueError as exc:
        ap.error(str(exc))
    args.shapes = list(dict.fromkeys(shapes + extra))
    # --quick on its own shapes runs the gated cells on QUICK_GATED's; else on every shape
    args.gated_shapes = (
        [s for s in args.shapes if s in QUICK_GATED]
        if args.quick and default_shapes
        else list(args.shapes)
    )
    if args.no_plot and args.plot is not None:
        ap.error("--plot and --no-plot contradict each other: give one of them")
    args.plot = None if args.no_plot else (args.plot or args.out.with_suffix(".png"))
    if args.repeats < 1 or min(args.threads) < 1:
        ap.error("--repeats and --threads must be >= 1")
    return args


def extra_shapes(args) -> list:
    """--extra's shapes: the default set unless --shapes names the shapes; 'none' for none."""
    if args.extra is None:
        return [] if args.shapes else (QUICK_EXTRA if args.quick else EXTRA)
    return [] if args.extra.lower() == "none" else parse_shapes(args.extra, "--extra")


def parse_skip(text: str) -> list:
    """--skip: peers to leave out, checked against runners.PEERS."""
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in PEERS]
    if unknown:
        raise ValueError(
            f"--skip: expected peers among {', '.join(PEERS)}, got {', '.join(unknown)}"
        )
    return names


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
    dtypes = sorted({np.dtype(d).name for d, _, _ in work}, key=["float32", "float64"].index)
    print_header(args)
    warn_if_busy()
    since = cpu_clock()
    roofs = {
        (d, n): measure_roofline(d, n, max(3, args.repeats)) for d in dtypes for n in args.threads
    }
    roofline_others = others_cpus(since)
    notes = []
    if args.skip:
        notes.append(f"left out by --skip: {', '.join(args.skip)}")
    with JaxPeer() as jax:
        rows, agreement = bench_all(work, args, roofs, notes, None if "jax" in args.skip else jax)
        jax_note = jax.note()
    notes += [n for n in (jax_note, load_note(rows, roofline_others), roofline_note(rows)) if n]
    quantized = []
    if not args.no_quantized:
        problems = [
            make_problem(shape, d)
            for d, shape, cell in work
            if np.dtype(d) == np.float32 and cell == "rnn"
        ]
        quantized = bench_quantized(problems, args.threads, rows, args)
    targets = evaluate_targets(rows) + quantized_targets(quantized)
    print_report(rows, roofs, targets, notes)
    print_quantized(quantized)
    write_json(args.out, args, rows, roofs, agreement, targets, notes, quantized)
    if args.plot is not None:
        plot_speedups(args.plot, rows)
    print_done(largest_difference(agreement), args.out, args.plot)


if __name__ == "__main__":
    main()
