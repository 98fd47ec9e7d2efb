"""latency's measurement: one row per number format, mode, cell, shape and thread count (every
library checked, then timed side by side with its repeats alternating), the targets of each row,
two threads against one, and compare's own grid at 1 and 2 threads for rnnfast alone."""

from __future__ import annotations

import time
import types

import numpy as np

from bench._common import (
    BUSY_CPUS,
    cores_for,
    cpu_clock,
    log,
    others_cpus,
    pinned_to,
    thread_count,
    time_alternating,
    time_each,
)
from bench.kernels.bf16_training import GUARD_LIMIT, errors_against
from bench.peers.compare import runners as compare_runners
from bench.peers.compare.measure import bench_shape, check_agreement
from bench.peers.compare.shapes import Problem, make_problem
from bench.peers.latency.bound import bound_seconds
from bench.peers.latency.runners import COMPARE_MODE, MINE, kernel_runner, runners
from rnnfast import _core
from rnnfast.quantize import ERROR_BOUND

OVER_PEER_GOAL = 1.25  # rnnfast >= 1.25x the fastest peer ...
OF_BOUND_GOAL = 0.85  # ... or >= 85% of its bound, whichever is lower (the easier)
THREADS_GOAL, WIDE_THREADS_GOAL, WIDE_H = 0.97, 1.85, 512  # 2-thread speed-up over 1 thread
# rnnfast's bf16 / int8 results against float32, ||a - b|| / ||b||: above it the run stops
GUARD = {("bf16", "forward"): ERROR_BOUND["bf16"], ("bf16", "train"): GUARD_LIMIT}
GUARD[("int8", "forward")] = ERROR_BOUND["int8"]
LATENCY_KEY = ("format", "mode", "cell", "label")  # a row's twin at another thread count
GRID_KEY = ("dtype", "mode", "cell", "label")


def pass_threads():
    """[stepping, team]: the threads the latest recurrent pass on this thread stepped with and
    its parallel region's team (_core.last_pass_threads), or None where this build lacks it."""
    get = getattr(_core, "last_pass_threads", None)
    if get is None:
        return None
    used = get()
    return [int(n) for n in used] if isinstance(used, tuple | list) else [int(used)] * 2


def check(p: Problem, fmt: str, mode: str, named: dict) -> dict:
    """float32: every pair of libraries agrees (compare's check; the run stops on a mismatch).
    bf16 / int8: each library's largest error against rnnfast float32's kernel, the run stopped
    where rnnfast's is above GUARD. Returns {library or output: error}."""
    if fmt == "float32":
        return check_agreement(p, COMPARE_MODE[mode], named)
    run, to_named = kernel_runner(p, mode)
    reference = to_named(run())
    errors = {lib: max(errors_against(n, reference).values()) for lib, n in named.items()}
    limit = GUARD[(fmt, mode)]
    bad = [f"{lib} {e:.3g}" for lib, e in errors.items() if lib in MINE and not e < limit]
    if bad:
        raise SystemExit(
            f"OUT OF BOUND: {fmt} {mode} {p.cell.name} {p.label}: ||{fmt} - float32|| / "
            f"||float32|| of {', '.join(bad)} >= {limit:g}; nothing timed"
        )
    return errors


def time_libraries(fns: dict, threads: int, args) -> dict:
    """Every library's timing. At 1 thread their repeats alternate (no library has a worker
    thread then). At more, rnnfast's two variants alternate (one thread pool) and each peer is
    timed after them, one after the other, each after its own warm-up (compare's way): a
    library's idle workers spin for a while after each call, and alternated with another
    library's they would take its cores (torch's OpenMP barriers then wait a scheduler slice
    each)."""
    if threads == 1:
        return time_alternating(fns, args.repeats, args.min_repeat_s, args.warmup_s)
    mine = {lib: fn for lib, fn in fns.items() if lib in MINE}
    timed = time_alternating(mine, args.repeats, args.min_repeat_s, args.warmup_s)
    for lib, fn in fns.items():
        if lib not in mine:
            timed |= time_each({lib: fn}, args.repeats, args.min_repeat_s, args.warmup_s)
    return timed


def bench_row(p: Problem, fmt: str, mode: str, threads: int, bounds: dict, args, notes) -> dict:
    """Check, then time, one format, mode, cell, shape and thread count on the row's cores."""
    since = cpu_clock()
    with thread_count(threads), pinned_to(cores_for(threads)):
        libs = runners(p, fmt, mode, threads, notes, args.skip)
        errors = check(p, fmt, mode, {lib: named(run()) for lib, (run, named) in libs.items()})
        _core.clear_contention_backoff()
        timed = time_libraries({lib: run for lib, (run, _) in libs.items()}, threads, args)
        libs["rnnfast"][0]()
        stepped = pass_threads()
        backoff = threads > 1 and _core.contention_backoff_seconds() > 0
        del libs
    if backoff:
        notes.append(
            f"{fmt} {mode} {p.cell.name} {p.label} at {threads} threads: rnnfast's contention "
            "back-off started (busy machine); its timing is partly 1-thread"
        )
    row = make_row(p, fmt, mode, threads, timed, bound_seconds(p, fmt, mode, threads, bounds))
    return row | {"errors": errors, "stepped_threads": stepped, "others_cpus": others_cpus(since)}


def make_row(p: Problem, fmt: str, mode: str, threads: int, timed: dict, bound: tuple) -> dict:
    """Each library's time, the fastest peer and rnnfast's ratio to it (its kernel's too), the
    bound, rnnfast's share of it and the target."""
    bound_s, bound_kind = bound
    seconds = {lib: t["median_s"] for lib, t in timed.items()}
    peers = {lib: s for lib, s in seconds.items() if lib not in MINE}
    best = min(peers, key=peers.get) if peers else None

    def over_best(lib):
        return peers[best] / seconds[lib] if best and lib in seconds else None

    over = over_best("rnnfast")
    of_bound = bound_s / seconds["rnnfast"]
    return {
        "format": fmt,
        "mode": mode,
        "cell": p.cell.name,
        "label": p.label,
        "shape": dict(zip("TBDH", p.shape)),
        "threads": threads,
        "libs": {
            lib: {
                "median_ms": t["median_s"] * 1e3,
                "samples_ms": [s * 1e3 for s in t["samples_s"]],
                "calls_per_repeat": t["inner"],
            }
            for lib, t in timed.items()
        },
        "best_peer": best,
        "over_best_peer": over,
        "kernel_over_best_peer": over_best("kernel"),
        "bound_ms": bound_s * 1e3,
        "bound": bound_kind,
        "of_bound": of_bound,
        "kernel_of_bound": bound_s / seconds["kernel"] if "kernel" in seconds else None,
        "target_met": of_bound >= OF_BOUND_GOAL or (over is not None and over >= OVER_PEER_GOAL),
    }


def threads_goal(H: int) -> float:
    return WIDE_THREADS_GOAL if H >= WIDE_H else THREADS_GOAL


def add_thread_scaling(rows: list, key: tuple) -> None:
    """Each row at n > 1 threads gets rnnfast's 1-thread time / its n-thread time
    ("over_1_thread"), the goal and whether it is met; 1-thread rows get None."""
    ones = {tuple(r[k] for k in key): r for r in rows if r["threads"] == 1}
    for r in rows:
        base = ones.get(tuple(r[k] for k in key))
        if r["threads"] == 1 or base is None:
            r["over_1_thread"] = r["threads_goal"] = r["threads_goal_met"] = None
            continue
        r["one_thread_ms"] = base["libs"]["rnnfast"]["median_ms"]
        r["one_thread_stepped"] = base["stepped_threads"]
        ratio = base["libs"]["rnnfast"]["median_ms"] / r["libs"]["rnnfast"]["median_ms"]
        goal = threads_goal(r["shape"]["H"])
        r["over_1_thread"], r["threads_goal"], r["threads_goal_met"] = ratio, goal, ratio >= goal


def bench_latency(args, bounds: dict, notes: list) -> list:
    """Every row of args' formats, modes, shapes, cells and thread counts."""
    rows = []
    for fmt in args.formats:
        for shape in args.shapes:
            for cell in args.cells:
                p = make_problem(shape, np.float32, cell=cell)
                for mode in args.modes:
                    if fmt == "int8" and mode == "train":
                        continue  # rnnfast.quantize's copies are inference only
                    for n in args.threads:
                        log(f"{fmt} {mode} {cell} {p.label} threads={n} ...")
                        rows.append(bench_row(p, fmt, mode, n, bounds, args, notes))
    add_thread_scaling(rows, LATENCY_KEY)
    return rows


def stepped_threads(p: Problem, threads: int, notes: list) -> dict:
    """{compare's mode: the threads rnnfast's pass stepped with}, one call of each."""
    with thread_count(threads), pinned_to(cores_for(threads)):
        mine = compare_runners.all_runners(p, threads, notes, skip=compare_runners.PEERS)
        out = {}
        for mode, (run, _) in mine["rnnfast"].items():
            run()
            out[mode] = pass_threads()
    return out


def bench_grid(args, bounds: dict, notes: list) -> list:
    """compare's rows (measure.bench_shape, rnnfast alone, float32) of args.grid_shapes at each
    thread count, with the threads each pass stepped with and two threads against one."""
    options = types.SimpleNamespace(
        isas=[],
        skip=compare_runners.PEERS,
        repeats=args.repeats,
        min_repeat_s=args.min_repeat_s,
        warmup_s=args.warmup_s,
    )
    rows = []
    for shape in args.grid_shapes:
        for cell in args.cells:
            p = make_problem(shape, np.float32, cell=cell)
            for n in args.threads:
                log(f"grid {cell} {p.label} threads={n} ...")
                start = time.perf_counter()
                block, _ = bench_shape(p, n, bounds["roofline"][n]["float32"], options, notes)
                stepped = stepped_threads(p, n, notes)
                for r in block:
                    r["stepped_threads"] = stepped.get(r["mode"])
                rows += block
                log(f"  {time.perf_counter() - start:.1f} s")
    add_thread_scaling(rows, GRID_KEY)
    return rows


def busy_note(rows: list, what: str) -> str | None:
    busy = [r for r in rows if r["others_cpus"] >= BUSY_CPUS]
    if not busy:
        return None
    return (
        f"other processes kept CPUs busy (column busy, up to "
        f"{max(r['others_cpus'] for r in busy):.1f}) during {len(busy)} of {len(rows)} {what}: "
        "those timings, above all the 2-thread ones, are disturbed; rerun on an idle machine"
    )
