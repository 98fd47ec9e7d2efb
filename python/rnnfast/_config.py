"""Threads and the run-time configuration report."""

from __future__ import annotations

import contextlib
import os
import platform

from . import _core
from ._validation import check_positive_int
from ._version import __version__

__all__ = ["get_num_threads", "set_num_threads", "threads", "show_config"]


def get_num_threads() -> int:
    """Threads the kernels may use (default: the cores OpenMP sees)."""
    return _core.get_num_threads()


def set_num_threads(n: int) -> None:
    """Set the threads the kernels may use; small problems may use fewer. Results for a given
    count are deterministic (in fact each output element is summed in the same order whatever
    the count)."""
    _core.set_num_threads(check_positive_int("n", n))


@contextlib.contextmanager
def threads(n: int):
    """Context manager: use ``n`` threads inside the block, restore the previous count after."""
    previous = get_num_threads()
    set_num_threads(n)
    try:
        yield
    finally:
        _core.set_num_threads(previous)


def show_config() -> str:
    """Print (and return) the version, ISA in use, ISAs compiled in, threads and compiler."""
    lines = [
        f"rnnfast {__version__}",
        f"isa in use:       {_core.active_isa()}",
        f"isas compiled in: {', '.join(_core.compiled_isas())}",
        f"isas this cpu runs: {', '.join(_core.supported_isas())}",
        *(
            f"{'cells, ' + isa + ':':18}{', '.join(_core.recurrent_cells())} (float32, float64)"
            for isa in _core.compiled_isas()
        ),
        f"bf16 products:    {_bf16_products()}",
        f"threads:          {get_num_threads()} (OpenMP {'on' if _core.openmp_enabled() else 'off'})",
        f"idle spin:        GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', 'unset')}",
        f"compiler:         {_core.compiler}",
        f"machine:          {platform.machine()}, Python {platform.python_version()}",
    ]
    pools = _other_thread_pools()
    if pools:
        lines.append(f"thread pools:     {pools}")
    if _core.isa_note():
        lines.append(f"note:             {_core.isa_note()}")
    text = "\n".join(lines)
    print(text)
    return text


def _bf16_products() -> str:
    """Where precision='bf16' runs its products here (rnnfast.precision), or why nowhere."""
    path = _core.bf16_products_path()
    kinds = {
        "amx": "amx (TDPBF16PS tiles; VDPBF16PS for products of few rows)",
        "avx512_bf16": "avx512_bf16 (VDPBF16PS)",
        "emulated": "emulated in software (the test switch)",
    }
    return kinds.get(path, path) if path else "none: " + _core.bf16_unavailable_reason()


def _other_thread_pools() -> str:
    """Every thread pool in the process as threadpoolctl sees it ('' without threadpoolctl): the
    pools' budgets add up when they run at the same time, which is what to check when the cores
    look oversubscribed."""
    try:
        import threadpoolctl
    except ImportError:
        return ""
    return ", ".join(
        f"{i['internal_api']} {i['num_threads']}" for i in threadpoolctl.threadpool_info()
    )
