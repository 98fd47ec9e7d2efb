"""What the bench scripts share: a clean BLAS environment, what the machine and its BLAS
libraries are, one thread count in every library, rnnfast on a chosen ISA, timing, the machine's
load, agreement errors and logging; and for the scripts that take ``--cases "T,B,D,H;..."``,
reading the cases, the text table of their rows and the JSON they leave. (Where the scripts read
and write is in ``bench/__init__.py``.)

The scripts import it as ``bench._common`` (they run as ``python -m bench.<folder>.<name>`` from
the repository root, which Python puts first on sys.path).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import threadpoolctl
import torch

import rnnfast
from bench._timing import (  # noqa: F401  (re-exported: the scripts time through _common)
    WARMUP_S,
    time_alternating,
    time_each,
    time_loop,
    timing,
    warm_up,
)

# ----------------------------------------------------------------------------- environment

BLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
REEXEC_MARKER = "_RNNFAST_BENCH_UNSET"


def script_name() -> str:
    """The running script as it was started: 'bench.peers.compare' under ``python -m``, else
    its file's name."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    if spec is None:
        return Path(sys.argv[0]).name
    return spec.name.removesuffix(".__main__")


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
        f"{script_name()}: {settings} set; re-executing with "
        f"{' and '.join(BLAS_OVERRIDES)} unset so that NumPy's BLAS picks its own kernels",
        flush=True,
    )
    env = {k: v for k, v in os.environ.items() if k not in BLAS_OVERRIDES}
    env[REEXEC_MARKER] = settings
    # sys.orig_argv keeps "-m bench.<folder>.<name>", which sys.argv has turned into a file path
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def blas_info() -> list:
    """NumPy's BLAS libraries as threadpoolctl sees them (name, version, CPU kernels, threads)."""
    keys = ("internal_api", "architecture", "version", "num_threads", "threading_layer", "prefix")
    return [
        {k: info.get(k) for k in keys}
        for info in threadpoolctl.threadpool_info()
        if info["user_api"] == "blas"
    ]


def numpy_blas_summary() -> str:
    """'openblas 0.3.31 SkylakeX (pthreads)': NumPy's BLAS and the kernel it picked for this CPU."""
    return (
        "; ".join(
            f"{b['internal_api']} {b['version']} {b['architecture']} ({b['threading_layer']})"
            for b in blas_info()
        )
        or "none found"
    )


def torch_blas() -> str:
    """torch's BLAS and its vector ISA, from torch.__config__.show(): 'Intel(R) oneAPI Math Kernel
    Library Version 2024.2...; CPU capability AVX512'."""
    text = torch.__config__.show()
    blas = next((line for line in text.splitlines() if "Math Kernel Library" in line), None)
    if blas is None:  # a build on another BLAS names it only in its build settings
        blas = next(
            (
                f"BLAS_INFO={w.split('=')[1].rstrip(',')}"
                for w in text.split()
                if w.startswith("BLAS_INFO=")
            ),
            "BLAS unknown",
        )
    capability = next(
        (line.split(":", 1)[1].strip() for line in text.splitlines() if "CPU capability" in line),
        "unknown",
    )
    return f"{blas.strip(' -')}; CPU capability {capability}"


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, with vendor, family, model and stepping (a VM may
    call its CPU just 'Intel(R) Xeon(R) Processor'); platform.processor() where there is none."""
    fields = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if not line.strip():
                break  # the first processor's block is enough
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    if "model name" not in fields:
        return platform.processor() or "unknown"
    ids = " ".join(f"{k} {fields[k]}" for k in ("cpu family", "model", "stepping") if k in fields)
    return f"{fields['model name']} ({fields.get('vendor_id', '?')} {ids})"


def process_threads() -> list:
    """The ids of every thread of this process (Linux: /proc/self/task), pools included."""
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:  # no procfs: the calling thread alone
        return [0]


def cores_for(threads: int) -> list:
    """The first `threads` CPUs this process may run on (all of them if it has fewer)."""
    return sorted(os.sched_getaffinity(0))[:threads]


@contextlib.contextmanager
def pinned_to(cores: list):
    """Every thread of this process, and every thread it starts meanwhile (they inherit the
    mask of the thread that starts them), on these cores; the previous masks back after.

    One process runs every library side by side, so pinning the process pins each peer's
    compute threads (torch's and OpenMP's pools, ORT's and OpenVINO's, started by the main
    thread) to the same cores as rnnfast's: no library gets a core the others lack."""
    mine = os.sched_getaffinity(0)
    previous = {}
    for tid in process_threads():
        try:
            previous[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cores)
        except OSError:  # the thread ended meanwhile
            continue
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        for tid in process_threads():  # threads started inside get the caller's old mask
            try:
                os.sched_setaffinity(tid, previous.get(tid, mine))
            except OSError:
                continue
        os.sched_setaffinity(0, mine)


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


def on_isa(fn, isa: str):
    """fn run with rnnfast's kernels of the given ISA, the previous one restored after each call.

    The switch is one atomic store (tens of ns), so calls on different ISAs can alternate."""

    def run():
        previous = rnnfast._core.active_isa()
        rnnfast._core.set_active_isa(isa)
        try:
            return fn()
        finally:
            rnnfast._core.set_active_isa(previous)

    return run


# ----------------------------------------------------------------------------- machine load

BUSY_CPUS = 0.2  # others' average CPU use above which a block of timings is flagged


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


# ----------------------------------------------------------------------------- agreement, logging


def relative_error(a, b) -> float:
    """max|a - b| / max|b| in float64; infinite where the shapes differ."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return math.inf
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def log(msg: str) -> None:
    """Progress to stderr, so that stdout holds only the report."""
    print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- cases, tables, JSON


def parse_tuples(text, fields="T,B,D,H", option="--cases"):
    """``"1,2,3,4;..."`` as a list of tuples of positive ints, one per name in ``fields``; anything
    else ends the script with a message naming the option and the part that is not one."""
    cases = []
    for part in text.split(";"):
        try:
            values = tuple(int(v) for v in part.split(","))
        except ValueError:
            values = ()
        if len(values) != len(fields.split(",")) or min(values) < 1:
            raise SystemExit(f"{option}: expected {fields} of positive ints, got {part!r}")
        cases.append(values)
    return cases


def add_timing_arguments(parser, repeats, min_repeat_s, out):
    """The options of a script timed by ``time_alternating``: ``--repeats``, ``--min-repeat-s``,
    ``--warmup-s`` (default WARMUP_S) and ``--out`` (its JSON), with the script's defaults."""
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--min-repeat-s", type=float, default=min_repeat_s)
    parser.add_argument("--warmup-s", type=float, default=WARMUP_S)
    parser.add_argument("--out", default=str(out))


def split_names(text, option, known):
    """``"rnn,lstm"`` as a list of names, as given; one not in ``known`` ends the script with a
    message naming ``option`` and the unknown names."""
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"{option}: expected some of {','.join(known)}, got {','.join(unknown)}")
    return names


def parse_cases(text):
    """``"T,B,D,H;..."`` as a list of (T, B, D, H) tuples of positive ints (parse_tuples)."""
    return parse_tuples(text)


def cell(key, spec="", suffix=""):
    """A column's text for a row: the row's value under ``key`` formatted by ``spec`` ('.3f',
    '.1e', ...), then ``suffix`` ('x' after a ratio)."""
    return lambda row: f"{row[key]:{spec}}{suffix}"


# The columns of a case's shape, in the order of --cases
SHAPE_COLUMNS = [("T", ">4", cell("T")), ("B", ">4", cell("B"))]
SHAPE_COLUMNS += [("D", ">5", cell("D")), ("H", ">5", cell("H"))]


def text_table(columns, rows):
    """A header of the columns' titles, a rule under it and a line per row, the columns one
    space apart. A column is (title, place, text): ``place`` the alignment and width of its
    title and cells ('>9', '<20'), ``text(row)`` its text for a row (see :func:`cell`)."""
    head = " ".join(f"{title:{place}}" for title, place, _ in columns)
    lines = [head, "-" * len(head)]
    lines += [" ".join(f"{text(r):{place}}" for _, place, text in columns) for r in rows]
    return "\n".join(lines)


def write_json(path, result):
    """``result`` as JSON at ``path`` (its folder made if need be), and a line saying so."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"\nwrote {out}")
