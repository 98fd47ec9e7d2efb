"""The communicator of data-parallel training: ``init`` (mpi4py is imported here only, when
it runs), this process's rank, the number of ranks, and sums and means over the ranks."""

from __future__ import annotations

import sys
import traceback

import numpy as np

__all__ = [
    "allreduce_sum",
    "average",
    "get_comm",
    "init",
    "is_initialized",
    "mpi",
    "rank",
    "size",
]

_COMM = None  # the communicator of init()
_MPI = None  # the mpi4py.MPI module, once imported


def mpi():
    """The mpi4py.MPI module, imported on first use (only here in rnnfast)."""
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except ImportError as error:
            raise ImportError(
                "rnnfast.distributed needs mpi4py and an MPI runtime: pip install 'rnnfast[mpi]' "
                "(mpi4py and mpich)"
            ) from error
        _MPI = MPI
    return _MPI


def init(comm=None, *, abort_on_error=True):
    """Start data-parallel training on ``comm`` (``MPI.COMM_WORLD`` by default); returns it.

    With ``abort_on_error`` (and more than one rank), an exception that no one catches prints
    its traceback (prefixed by the rank) and calls ``comm.Abort(1)``: every rank exits with an
    error instead of the others waiting forever in their next collective call.

    Raises
    ------
    ImportError
        mpi4py is not installed (``pip install 'rnnfast[mpi]'``).
    """
    global _COMM
    MPI = mpi()
    if comm is None:
        comm = MPI.COMM_WORLD
    if not isinstance(comm, MPI.Comm):
        raise TypeError(f"comm: expected an mpi4py communicator, got {type(comm).__name__}")
    _COMM = comm
    if abort_on_error and comm.Get_size() > 1:
        _install_abort_hook(comm)
    return comm


def _install_abort_hook(comm):
    previous = sys.excepthook
    if getattr(previous, "_rnnfast_abort", False):
        previous = previous._previous

    def hook(kind, value, tb):
        prefix = f"[rank {comm.Get_rank()}] "
        text = "".join(traceback.format_exception(kind, value, tb))
        sys.stderr.write("".join(prefix + line + "\n" for line in text.splitlines()))
        sys.stderr.write(f"{prefix}rnnfast.distributed: aborting all {comm.Get_size()} ranks\n")
        sys.stderr.flush()
        sys.stdout.flush()
        comm.Abort(1)

    hook._rnnfast_abort = True
    hook._previous = previous
    sys.excepthook = hook


def is_initialized():
    """Whether :func:`init` has run."""
    return _COMM is not None


def get_comm():
    """The communicator of :func:`init`."""
    if _COMM is None:
        raise RuntimeError(
            "rnnfast.distributed: call rnnfast.distributed.init() first (in a script run "
            "under mpiexec)"
        )
    return _COMM


def rank():
    """This process's rank, 0 .. size() - 1."""
    return get_comm().Get_rank()


def size():
    """The number of ranks."""
    return get_comm().Get_size()


def average(value):
    """The mean over the ranks of a number or an array (a new float64 value, or array)."""
    comm = get_comm()
    arr = np.array(value, dtype=np.float64)
    out = np.empty_like(arr)
    comm.Allreduce(arr, out, op=mpi().SUM)
    out /= comm.Get_size()
    return float(out) if out.ndim == 0 else out


def allreduce_sum(values):
    """The sum over the ranks of an array (float64)."""
    arr = np.asarray(values, dtype=np.float64)
    out = np.empty_like(arr)
    get_comm().Allreduce(arr, out, op=mpi().SUM)
    return out
