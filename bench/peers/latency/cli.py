"""rnnfast in the latency regime (issue 41, items 2 and 4): small batches and short sequences,
1 and 2 threads, float32, bf16 and int8, against torch, ONNX Runtime and OpenVINO, side by side
in one process, each row beside its bound.

Run from the repository root:

    python -m bench.peers.latency                   # the issue's 5 shapes x RNN, GRU, LSTM x
                                                    # forward, training x 1, 2 threads x
                                                    # float32, bf16, int8 (forward)
    python -m bench.peers.latency --compare-grid    # and compare's grid (GRID + EXTRA) at 1 and
                                                    # 2 threads, rnnfast alone
    python -m bench.peers.latency --formats none --compare-grid   # the grid alone
    python -m bench.peers.latency --shapes 200x1x32x64 --cells gru --formats float32 --threads 1
    python -m bench.peers.latency --json PATH       # the JSON elsewhere (default
                                                    # bench/results/latency.json)

How long: the default run has 150 rows (5 shapes x 3 cells x (2 modes x 2 formats + int8's
forward) x 2 thread counts) of 2-5 libraries, each warmed up 0.25 s then timed 5 x >= 20 ms, plus
the bandwidth and rooflines; --compare-grid adds compare's 12 shapes x 3 cells x 2 thread counts
x 3 modes, rnnfast alone (training at 25x64x1024x1024 takes most of it). Measured on a 2-core
Xeon VM (AVX-512, AMX) with others keeping 1.0-1.7 of the 2 CPUs busy, at --repeats 3
--min-repeat-ms 10 --warmup-ms 150: 9.1 minutes for the rows, 3.8 for the grid alone. The
default run with --compare-grid: about 12 minutes idle (*estimate*).

Each row (format, mode, cell, shape T x B x D x H, threads):

    modes     forward   the forward returning every h_t (and the last states)
              train     forward + backward of sum(y) (dy = ones): dx and every weight gradient
    formats   float32   rnnfast's float32 layer; torch.nn, ONNX Runtime, OpenVINO
                        (INFERENCE_PRECISION_HINT f32) through compare's runners
              bf16      rnnfast's layer with precision="bf16" (bf16 products, float32 sums);
                        torch.autocast bf16 (the forward under no_grad; training as
                        bench.kernels.bf16_training runs it), OpenVINO bf16 (forward only)
              int8      rnnfast.quantize(layer, "int8"), forward only; torch's
                        quantize_dynamic (GRU, LSTM) and ONNX Runtime's quantize_dynamic of
                        compare's graph (LSTM: DynamicQuantizeLSTM); the Elman cell has no
                        int8 peer (runners.py)

rnnfast's time is the layer's call, what a user gets; "kernel" beside it is rnnfast.functional's
call of the same products (compare's runners), so the difference is the layer's Python path
(item 1 of the issue). Every library runs on the row's cores: this whole process pinned with
os.sched_setaffinity (every thread of it) to the first core at 1 thread and to the first 2 at 2;
rnnfast.threads(n), torch.set_num_threads(n), ORT's intra_op_num_threads and OpenVINO's
INFERENCE_NUM_THREADS = n. Times are medians of --repeats repeats, each a loop of calls of
>= --min-repeat-ms after a warm-up of --warmup-ms each (bench/_common.py). At 1 thread every
library's repeats alternate (time_alternating: a change in the machine's load lands on all
alike). At 2 threads only rnnfast's layer and kernel alternate, and each peer is then timed in
turn after its warm-up (time_each, as compare does): a library's idle worker threads spin after
each call, and alternated with another library they take its second core (torch's OpenMP
barriers then wait a scheduler slice each, 100-1000x its time on a tiny shape).

Before anything is timed the results are checked: float32 libraries must agree pairwise
(compare's tolerance, 1e-4 max|a - b| / max|b|); rnnfast's bf16 and int8 results must be within
rnnfast.quantize's ERROR_BOUND of float32 (bf16 training: bf16_training's 5e-2), ||a - b|| /
||b||, and the peers' errors are recorded. A failed check stops the run.

Beside each row: the fastest peer and rnnfast's ratio to it (its time / rnnfast's; target 1.25x),
the bound (bound.py: at B <= 16 the bytes of W_hh read per step over the L2 bandwidth of one core
measured here, times the threads, plus the rest of the FLOPs at the measured peak; else the
roofline), rnnfast's share of it, and whether the target "1.25x the fastest peer or 85% of the
bound, whichever is lower" is met. Item 4: at 2 threads, rnnfast's 1-thread time / its 2-thread
time (target >= 0.97x, >= 1.85x at H >= 512) and the threads the layer's last recurrent pass
stepped with (_core.last_pass_threads(); "-" where this build lacks it). --compare-grid runs
compare's own rows (its measure.bench_shape, rnnfast alone, float32, every mode) at 1 and 2
threads and lists every row slower on 2 threads than on 1.

The header names the CPU, rnnfast's ISA and its bf16 and int8 paths, the thread counts and their
cores, the bandwidth and the peaks; the JSON (--json) holds the same with every row. Column
"busy" is the CPUs other processes used meanwhile: rows with busy > 0 are not to be trusted.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench import RESULTS
from bench._common import BUSY_CPUS, WARMUP_S, cpu_clock, log, others_cpus, split_names
from bench.peers.compare.shapes import CELLS, EXTRA, GRID, label, parse_cells, parse_shapes
from bench.peers.latency import report
from bench.peers.latency.bound import measure_bounds
from bench.peers.latency.measure import bench_grid, bench_latency, busy_note
from bench.peers.latency.runners import FORMATS, MODES, PEERS
from rnnfast.precision import bf16_available

SHAPES = [(100, 1, 256, 256), (100, 16, 64, 128), (200, 1, 32, 64), (150, 1, 50, 200)]
SHAPES += [(50, 4, 128, 128)]  # the table, in its order


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m bench.peers.latency", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument(
        "--shapes",
        default=",".join(map(label, SHAPES)),
        help="comma-separated TxBxDxH (default: the issue's 5 shapes)",
    )
    ap.add_argument("--cells", default=",".join(CELLS), help="some of rnn,gru,lstm (default all)")
    ap.add_argument(
        "--formats",
        default=",".join(FORMATS),
        help="some of float32,bf16,int8, or none (the grid alone); default all",
    )
    ap.add_argument("--modes", default=",".join(MODES), help="some of forward,train (default both)")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    ap.add_argument("--skip", default="", help=f"peers to leave out, some of {','.join(PEERS)}")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats (default 5)")
    ap.add_argument(
        "--min-repeat-ms",
        type=float,
        default=20.0,
        help="a repeat loops over calls for at least this long (default 20)",
    )
    ap.add_argument(
        "--warmup-ms",
        type=float,
        default=WARMUP_S * 1e3,
        help=f"each library runs this long first (default {WARMUP_S * 1e3:g})",
    )
    ap.add_argument(
        "--roofline-repeats", type=int, default=3, help="repeats of the peaks and bandwidth (3)"
    )
    ap.add_argument(
        "--compare-grid",
        action="store_true",
        help="also run bench.peers.compare's grid (GRID + EXTRA) at the thread counts, rnnfast "
        "alone, and list the rows slower on 2 threads than on 1",
    )
    ap.add_argument(
        "--grid-shapes",
        default=None,
        help="the shapes of --compare-grid (default compare's GRID + EXTRA)",
    )
    ap.add_argument(
        "--json",
        type=Path,
        default=RESULTS / "latency.json",
        help="where the JSON goes (default bench/results/latency.json)",
    )
    args = ap.parse_args(argv)
    args.min_repeat_s, args.warmup_s = args.min_repeat_ms / 1e3, args.warmup_ms / 1e3
    try:
        args.shapes = parse_shapes(args.shapes)
        args.grid_shapes = parse_shapes(args.grid_shapes) if args.grid_shapes else GRID + EXTRA
        args.cells = parse_cells(args.cells)
        args.threads = [int(t) for t in args.threads.split(",")]
    except ValueError as exc:
        ap.error(str(exc))
    formats = "" if args.formats.strip().lower() == "none" else args.formats
    args.formats = split_names(formats, "--formats", FORMATS)
    args.modes = split_names(args.modes, "--modes", MODES)
    args.skip = split_names(args.skip, "--skip", PEERS)
    if min(args.threads) < 1 or args.repeats < 1 or args.roofline_repeats < 1:
        ap.error("--threads, --repeats and --roofline-repeats must be >= 1")
    if not args.formats and not args.compare_grid:
        ap.error("--formats none leaves nothing to run without --compare-grid")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    notes = []
    if "bf16" in args.formats and not bf16_available():
        args.formats.remove("bf16")
        notes.append("bf16 skipped: this machine runs no bf16 products")
    info = report.machine_info()
    since = cpu_clock()
    bounds = measure_bounds(args.threads, args.roofline_repeats)
    if others_cpus(since) >= BUSY_CPUS:
        notes.append(
            f"other processes kept {others_cpus(since):.1f} CPUs busy while the bandwidth and "
            "peaks were measured: the bounds are low"
        )
    report.print_header(info, args, bounds)
    log("bandwidth and peaks measured")
    rows = bench_latency(args, bounds, notes)
    grid = bench_grid(args, bounds, notes) if args.compare_grid else []
    notes += [n for n in (busy_note(rows, "rows"), busy_note(grid, "grid rows")) if n]
    if rows:
        report.print_tables(rows)
        report.print_targets(rows)
    report.print_grid(grid)
    for note in notes:
        print(f"note: {note}")
    return report.write(args.json, args, info, bounds, rows, grid, notes)
