"""compare's measurement: every library (and rnnfast on each ISA of --isas) checked against the
others, then timed, one cell, shape and thread count at a time; one result row per mode, with each
library's time, GFLOP/s and roofline fraction, the speed-ups over the peers and rnnfast per ISA."""

from __future__ import annotations

import os
import time

import numpy as np

import rnnfast
from bench._common import (
    BUSY_CPUS,
    cores_for,
    cpu_clock,
    log,
    on_isa,
    others_cpus,
    pinned_to,
    relative_error,
    thread_count,
    time_alternating,
    time_each,
)
from bench.peers.compare.roofline import roofline_seconds
from bench.peers.compare.runners import PEERS, all_runners
from bench.peers.compare.shapes import MODES, Problem, make_problem, mode_flops, on_grid

TOL = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-9}  # max|a-b| / max|b|


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
                [
                    f"DISAGREEMENT: {p.dtype.name} {p.cell.name} {p.label} mode {mode}; "
                    "nothing timed:",
                    *failures,
                ]
            )
        )
    return worst


def largest_difference(agreement: list) -> float:
    """The largest relative difference between any two libraries over the whole run."""
    return max(
        (e for a in agreement for m in a["max_relative_error"].values() for e in m.values()),
        default=0.0,
    )


def bench_all(work: list, args, roofs: dict, notes: list, jax=None) -> tuple[list, list]:
    """Every (dtype, shape, cell) of the work list at every thread count; returns (rows,
    agreement). jax: the run's jax_peer.JaxPeer, or None."""
    rows, agreement = [], []
    for dtype, shape, cell in work:
        p = make_problem(shape, dtype, cell=cell)
        for n in args.threads:
            log(f"{p.dtype.name} {cell} {p.label} threads={n} ...")
            start = time.perf_counter()
            shape_rows, agree = bench_shape(p, n, roofs[(p.dtype.name, n)], args, notes, jax)
            log(f"  {time.perf_counter() - start:.1f} s")
            rows += shape_rows
            agreement.append(
                {
                    "dtype": p.dtype.name,
                    "threads": n,
                    "cell": cell,
                    "shape": p.label,
                    "max_relative_error": agree,
                }
            )
    return rows, agreement


def isas_to_time(requested: list, active: str) -> list:
    """The ISAs rnnfast alternates between, the active one first; none unless another is asked."""
    others = [isa for isa in dict.fromkeys(requested) if isa != active]
    return [active, *others] if others else []


def bench_shape(
    p: Problem, threads: int, roof: dict, args, notes: list, jax=None
) -> tuple[list, dict]:
    """Check and time every mode of one problem at one thread count; returns (rows, agreement).

    With other ISAs requested (args.isas), rnnfast runs on each of them too: their results join the
    agreement check as "rnnfast@<isa>", and rnnfast's repeats alternate between the ISAs (every
    call switching to its ISA, the active one included), so the ISAs are compared side by side;
    rnnfast's row figure is then its active ISA's timing from that alternation."""
    rows, agreement = [], {}
    active = rnnfast._core.active_isa()
    isas = isas_to_time(args.isas, active)
    since = cpu_clock()
    # every library on the same cores: the row's thread count, the first cores of this process
    with thread_count(threads), pinned_to(cores_for(threads)):
        runners = all_runners(p, threads, notes, jax, getattr(args, "skip", ()))
        for mode in MODES:
            libs = {lib: r[mode] for lib, r in runners.items() if mode in r}
            agreement[mode] = check_agreement(p, mode, outputs(libs, isas))
            rnnfast._core.clear_contention_backoff()
            timings, by_isa = time_mode(libs, isas, args)
            rows.append(make_row(p, threads, mode, timings, roof, by_isa))
            if threads > 1 and rnnfast._core.contention_backoff_seconds() > 0:
                # rnnfast fell back to one thread for a while: the cores were taken by others
                notes.append(
                    f"{p.cell.name} {p.label} {mode} at {threads} threads: rnnfast's contention "
                    "back-off started (busy machine); its timing is partly 1-thread"
                )
        del runners
    others = others_cpus(since)
    if others >= BUSY_CPUS:
        log(f"  other processes used {others:.1f} CPUs meanwhile")
    for row in rows:
        row["others_cpus"] = others
    return rows, agreement


def outputs(libs: dict, isas: list) -> dict:
    """{library: {name: array}} of one call each (their warm-up), rnnfast also on isas[1:]."""
    named = {lib: to_named(run()) for lib, (run, to_named) in libs.items()}
    run_mine, mine_named = libs["rnnfast"]
    for isa in isas[1:]:
        named[f"rnnfast@{isa}"] = mine_named(on_isa(run_mine, isa)())
    return named


def time_mode(libs: dict, isas: list, args) -> tuple[dict, dict]:
    """(timing per library, rnnfast's timing per ISA) of one mode.

    Given ISAs, rnnfast's repeats alternate between them (_common.time_alternating: one rnnfast
    pool, so a change in the machine's load lands on every ISA alike) and its timing is the first
    (active) ISA's; the other libraries are timed one after the other (_common.time_each), a
    library that times itself elsewhere (a run with timed(): JAX in its process) by its run."""
    run_mine = libs["rnnfast"][0]
    by_isa = {}
    if isas:
        by_isa = time_alternating(
            {isa: on_isa(run_mine, isa) for isa in isas},
            args.repeats,
            args.min_repeat_s,
            args.warmup_s,
        )
    timings = {"rnnfast": by_isa[isas[0]]} if by_isa else {}
    for lib, (run, _) in libs.items():
        if lib in timings:
            continue
        if hasattr(run, "timed"):
            timings[lib] = run.timed(args.repeats, args.min_repeat_s, args.warmup_s)
        else:
            timings.update(time_each({lib: run}, args.repeats, args.min_repeat_s, args.warmup_s))
    return timings, by_isa


def lib_figures(t: dict, flops: int, roof_s: float) -> dict:
    """One library's (or ISA's) timing as a row reports it."""
    return {
        "median_ms": t["median_s"] * 1e3,
        "gflops": flops / t["median_s"] / 1e9,
        "roofline_fraction": roof_s / t["median_s"],
        "samples_ms": [s * 1e3 for s in t["samples_s"]],
        "calls_per_repeat": t["inner"],
    }


def make_row(
    p: Problem, threads: int, mode: str, timings: dict, roof: dict, by_isa=None, active=None
) -> dict:
    """One result row: each library's times, GFLOP/s and roofline fraction, the speed-ups over the
    peers and, where by_isa has other ISAs' timings of rnnfast, each ISA's time / the active one's
    (above 1: the active ISA is faster). active: the ISA rnnfast ran on (default: the active one)."""
    flops = mode_flops(p, mode)
    roof_s = roofline_seconds(p, mode, roof)
    base = timings["rnnfast"]["median_s"]
    by_isa = by_isa or {}
    active = active or rnnfast._core.active_isa()
    return {
        "dtype": p.dtype.name,
        "threads": threads,
        "cell": p.cell.name,
        "shape": dict(zip("TBDH", p.shape)),
        "label": p.label,
        "grid": on_grid(p.shape),
        "mode": mode,
        "flops": flops,
        "roofline_ms": roof_s * 1e3,
        "libs": {lib: lib_figures(t, flops, roof_s) for lib, t in timings.items()},
        "speedup": {peer: timings[peer]["median_s"] / base for peer in PEERS if peer in timings},
        "active_isa": active,
        "isas": {isa: lib_figures(t, flops, roof_s) for isa, t in by_isa.items()},
        "isa_ratio": {
            isa: t["median_s"] / by_isa[active]["median_s"]
            for isa, t in by_isa.items()
            if isa != active
        },
    }


def load_note(rows: list, roofline_others: float) -> str | None:
    """One note on the rows timed while other processes were using the CPUs, if any were."""
    blocks = {(r["dtype"], r["threads"], r["cell"], r["label"]): r["others_cpus"] for r in rows}
    busy = [v for v in blocks.values() if v >= BUSY_CPUS]
    if not busy and roofline_others < BUSY_CPUS:
        return None
    return (
        f"other processes kept CPUs busy (column 'busy', up to {max(busy, default=0):.1f} "
        f"of {os.cpu_count()}) during {len(busy)} of {len(blocks)} cell/shape/thread blocks and "
        f"{roofline_others:.1f} during the roofline measurement: those timings, above all "
        "the multi-threaded ones, are disturbed; rerun on an idle machine"
    )
