"""latency's report: the header (CPU, rnnfast's ISA and paths, threads, the bandwidth and the
rooflines), a table per number format and mode, the targets, two threads against one, compare's
grid at 1 and 2 threads, and the JSON document."""

from __future__ import annotations

import datetime
import os

from bench._common import cores_for, text_table, write_json
from bench.peers.compare import report as compare_report
from bench.peers.latency.measure import OF_BOUND_GOAL, OVER_PEER_GOAL, pass_threads
from bench.peers.latency.runners import PEERS
from rnnfast import _core


def machine_info() -> dict:
    """compare's machine record, with rnnfast's bf16 and int8 paths and last_pass_threads."""
    return compare_report.machine_info() | {
        "bf16_products_path": _core.bf16_products_path() or None,
        "int8_path": _core.quantized_path("int8"),
        "last_pass_threads": pass_threads() is not None,
    }


def print_header(info: dict, args, bounds: dict) -> None:
    print(
        f"cpu: {info['cpu']}; {info['logical_cpus']} logical CPUs; rnnfast {info['rnnfast']} "
        f"isa {info['rnnfast_isa']} (this cpu runs {', '.join(info['rnnfast_isas_supported'])}); "
        f"bf16 products path {info['bf16_products_path'] or 'none'}; int8 path "
        f"{info['int8_path']}; _core.last_pass_threads "
        f"{'present' if info['last_pass_threads'] else 'absent (stepped: -)'}"
    )
    print(
        f"torch {info['torch']}, onnxruntime {info['onnxruntime']}, openvino "
        f"{info['openvino'] or 'not installed'}; threads "
        + ", ".join(f"{n} on cores {cores_for(n)}" for n in args.threads)
        + f" (this process pinned there, every library at that thread count); repeats "
        f"{args.repeats} of >= {args.min_repeat_s * 1e3:g} ms after a warm-up of "
        f"{args.warmup_s * 1e3:g} ms, alternating between the libraries at 1 thread (above: "
        "rnnfast's layer and kernel alternate, then each peer in turn)"
    )
    l2 = bounds["l2"]
    reads = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in l2["bytes_per_s_by_read"].items())
    print(
        f"L2 read bandwidth, one core: {l2['bytes_per_s'] / 1e9:.1f} GB/s (GB/s {reads}; a "
        f"{l2['buffer_bytes'] >> 10} KiB buffer, L2 {l2['l2_bytes'] >> 10} KiB)"
    )
    for n, roof in bounds["roofline"].items():
        print(
            f"peak threads={n}: float32 {roof['float32']['matmul_gflops']:.1f} GFLOP/s "
            f"({roof['float32']['matmul_from']}), bf16 {roof['bf16']['matmul_gflops']:.1f} "
            f"(2x float32), bf16 measured {roof['bf16']['measured_matmul_gflops']:.1f}"
        )


def stepped(r: dict) -> str:
    """The threads the pass stepped with, "/team" after it where its team was larger."""
    used = r["stepped_threads"]
    if used is None:
        return "-"
    return str(used[0]) if used[0] == used[1] else f"{used[0]}/{used[1]}"


def ms(lib):
    return lambda r: f"{r['libs'][lib]['median_ms']:.3f}" if lib in r["libs"] else "-"


def times(value, spec=".2f"):
    return "-" if value is None else f"{value:{spec}}x"


def percent(value):
    return "-" if value is None else f"{100 * value:.0f}%"


def columns(rows: list) -> list:
    """A table's columns: rnnfast's and its kernel's time, each peer's that ran on some row."""
    peers = [p for p in PEERS if any(p in r["libs"] for r in rows)]
    return [
        ("cell", "<5", lambda r: r["cell"]),
        ("shape", "<14", lambda r: r["label"]),
        ("thr", ">3", lambda r: str(r["threads"])),
        ("rnnfast ms", ">10", ms("rnnfast")),
        ("kernel ms", ">9", ms("kernel")),
        *[(f"{p} ms", ">9", ms(p)) for p in peers],
        ("best", ">8", lambda r: r["best_peer"] or "-"),
        ("x best", ">7", lambda r: times(r["over_best_peer"])),
        ("kern x", ">7", lambda r: times(r["kernel_over_best_peer"])),
        ("bound ms", ">9", lambda r: f"{r['bound_ms']:.3f}"),
        ("of", ">4", lambda r: "L2" if r["bound"] == "l2" else "roof"),
        ("%bound", ">6", lambda r: percent(r["of_bound"])),
        ("kern %", ">6", lambda r: percent(r["kernel_of_bound"])),
        ("target", ">6", lambda r: "met" if r["target_met"] else "MISSED"),
        ("2t/1t", ">6", lambda r: times(r["over_1_thread"])),
        ("stepped", ">7", stepped),
        ("busy", ">4", lambda r: f"{r['others_cpus']:.1f}"),
    ]


LEGEND = (
    "median ms per call; rnnfast = the layer's call (float32, precision='bf16', "
    "rnnfast.quantize int8), kernel = rnnfast.functional's call of the same; best = the fastest "
    "peer; x best = its time / rnnfast's (kern x: / the kernel's); bound = the L2 matrix-vector "
    "bound at B <= 16, else the roofline (bound.py); %bound = bound / rnnfast's time; target "
    f"met: x best >= {OVER_PEER_GOAL:g} or %bound >= {100 * OF_BOUND_GOAL:.0f}% (whichever is "
    "lower); 2t/1t = rnnfast's 1-thread time / this row's; stepped = the threads the layer's "
    "last pass stepped with (/its team where larger; _core.last_pass_threads); busy = CPUs other processes used"
)
TITLES = {
    ("float32", "forward"): "float32 forward (every h_t): torch.nn, ONNX Runtime, OpenVINO f32",
    ("float32", "train"): "float32 training (forward + backward of sum(y)): torch.nn autograd",
    ("bf16", "forward"): "bf16 forward: torch autocast bf16, OpenVINO bf16",
    ("bf16", "train"): "bf16 training: torch autocast bf16 (forward under autocast)",
    ("int8", "forward"): (
        "int8 forward: torch quantize_dynamic (GRU, LSTM), ONNX Runtime quantize_dynamic (LSTM)"
    ),
}


def print_tables(rows: list) -> None:
    print()
    print(LEGEND)
    for (fmt, mode), title in TITLES.items():
        group = [r for r in rows if (r["format"], r["mode"]) == (fmt, mode)]
        if group:
            print()
            print(title)
            print(text_table(columns(group), group))


def where(r: dict) -> str:
    fmt = r.get("format", r.get("dtype"))
    return f"{fmt} {r['mode']} {r['cell']} {r['label']} {r['threads']}t"


def print_targets(rows: list) -> None:
    """Per format, mode and thread count: rows meeting the target; then every miss."""
    print()
    print("targets (reported, not asserted)")
    groups = {}
    for r in rows:
        groups.setdefault((r["format"], r["mode"], r["threads"]), []).append(r)
    for (fmt, mode, n), group in groups.items():
        met = sum(r["target_met"] for r in group)
        print(
            f"  [{'MET' if met == len(group) else 'MISSED':>6}] {fmt} {mode} {n}t: "
            f"{met}/{len(group)} rows at >= {OVER_PEER_GOAL:g}x the fastest peer or >= "
            f"{100 * OF_BOUND_GOAL:.0f}% of the bound"
        )
    for r in rows:
        if not r["target_met"]:
            print(
                f"           missed: {where(r)}: {times(r['over_best_peer'])} "
                f"{r['best_peer'] or 'no peer'}, {percent(r['of_bound'])} of bound"
            )
    print_thread_scaling(rows, "latency rows")


def print_thread_scaling(rows: list, what: str) -> None:
    """The rows whose 2-thread figure misses its goal, and those slower than 1 thread."""
    scaled = [r for r in rows if r.get("over_1_thread") is not None]
    if not scaled:
        return
    missed = [r for r in scaled if not r["threads_goal_met"]]
    slower = [r for r in scaled if r["over_1_thread"] < 1.0]
    print(
        f"two threads against one, {what}: {len(scaled) - len(missed)}/{len(scaled)} meet "
        f"the goal (>= {scaled[0]['threads_goal']:g}x; 1.85x at H >= 512); {len(slower)} slower "
        "on 2 threads than on 1"
    )
    for r in missed:
        print(
            f"           {'slower' if r['over_1_thread'] < 1 else 'missed'}: {where(r)}: "
            f"{r['over_1_thread']:.2f}x (goal {r['threads_goal']:g}x), stepped "
            f"{stepped(r)}"
        )


GRID_COLUMNS = [
    ("cell", "<5", lambda r: r["cell"]),
    ("shape", "<18", lambda r: r["label"]),
    ("mode", "<9", lambda r: r["mode"]),
    ("1t ms", ">9", lambda r: f"{r['one_thread_ms']:.3f}"),
    ("thr", ">3", lambda r: str(r["threads"])),
    ("ms", ">9", lambda r: f"{r['libs']['rnnfast']['median_ms']:.3f}"),
    ("roof%", ">6", lambda r: percent(r["libs"]["rnnfast"]["roofline_fraction"])),
    ("x 1t", ">6", lambda r: times(r["over_1_thread"])),
    ("goal", ">5", lambda r: times(r["threads_goal"], "g")),
    ("met", ">6", lambda r: "met" if r["threads_goal_met"] else "MISSED"),
    (
        "stepped",
        ">7",
        lambda r: f"{stepped({'stepped_threads': r['one_thread_stepped']})}, {stepped(r)}",
    ),
    ("busy", ">4", lambda r: f"{r['others_cpus']:.1f}"),
]


def print_grid(rows: list) -> None:
    """A line per grid row at more than 1 thread, beside its 1-thread time."""
    scaled = [r for r in rows if r.get("over_1_thread") is not None]
    if not scaled:
        return
    print()
    print(
        "bench.peers.compare's grid, rnnfast alone (rnnfast.functional, float32, compare's "
        "measure.bench_shape): 1t ms = at 1 thread, ms = at thr threads, x 1t = their ratio, "
        "roof% = compare's roofline share, stepped = the threads the pass stepped with at 1 "
        "thread, at thr"
    )
    print(text_table(GRID_COLUMNS, scaled))
    print_thread_scaling(rows, "compare's grid")


def write(path, args, info, bounds, rows, grid, notes) -> dict:
    doc = {
        "script": "bench.peers.latency",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": info,
        "args": {k: str(v) if isinstance(v, os.PathLike) else v for k, v in vars(args).items()},
        "bounds": bounds,
        "goals": {"over_best_peer": OVER_PEER_GOAL, "of_bound": OF_BOUND_GOAL},
        "rows": rows,
        "grid": grid,
        "notes": notes,
    }
    write_json(path, doc)
    return doc
