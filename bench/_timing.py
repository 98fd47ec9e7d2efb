"""The bench scripts' timing: warm-ups, repeats of back-to-back calls, medians. Standard library
only, so that a child process that must set itself up before any numerical library loads (the
JAX peer of bench.peers.compare, pinned to its cores first) can time itself the same way;
``bench._common`` re-exports all of it.
"""

from __future__ import annotations

import gc
import math
import statistics
import time

WARMUP_S = 0.25  # each library runs itself this long before it is timed (see time_each)


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


def timing(samples: list, inner: int) -> dict:
    """One function's timing as the bench scripts report it."""
    return {"median_s": statistics.median(samples), "samples_s": samples, "inner": inner}


def time_each(fns: dict, repeats: int, min_repeat_s: float, warmup_s: float | None = None) -> dict:
    """Median seconds per call of each function, timed one library after the other.

    Each library first warms up by running itself for warmup_s (default WARMUP_S): that also
    outlasts the previous
    library's worker threads, which spin for a while after a call (OpenBLAS's for ~0.1 s) and
    would take a core from the next library. Interleaving the libraries' repeats let them do
    that; sleeping between them instead lets the idle CPUs of a virtual machine go cold."""
    out = {}
    for lib, fn in fns.items():
        inner = warm_up(fn, WARMUP_S if warmup_s is None else warmup_s, min_repeat_s)
        gc.collect()
        out[lib] = timing([time_loop(fn, inner) for _ in range(repeats)], inner)
    return out


def time_alternating(
    fns: dict, repeats: int, min_repeat_s: float, warmup_s: float | None = None
) -> dict:
    """Median seconds per call of each function, their repeats alternating.

    time_each times one library after the other, because one library's idle threads would take
    cores from the next; where every function is rnnfast on one thread pool, alternating keeps a
    change in the machine's load from landing on one side only."""
    warmup_s = WARMUP_S if warmup_s is None else warmup_s
    inner = {k: warm_up(fn, warmup_s, min_repeat_s) for k, fn in fns.items()}
    samples = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            samples[k].append(time_loop(fn, inner[k]))
    return {k: timing(v, inner[k]) for k, v in samples.items()}
