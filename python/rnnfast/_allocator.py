"""glibc's malloc gives freed memory at the top of its heap back to the system once more than
its trim threshold (dynamic: twice the largest recent mmap threshold) lies free. A training
loop allocates and frees the same few arrays every batch (kernel outputs, packed weights,
gradients), and which of them lands at the top of the heap depends on everything else the
program allocates in between: in one loop the heap kept its pages, in another (fit's, with a
few more small arrays per batch) it trimmed and re-faulted 117,000 pages per epoch, making the
same kernels run 1.3x longer (bench/variable_length.py, names). A fixed trim threshold keeps up
to that much freed memory for reuse, whatever the allocation order.

Set at import on Linux with glibc, unless ``MALLOC_TRIM_THRESHOLD_`` (glibc's own setting) or
``RNNFAST_MALLOC_TRIM=0`` is in the environment.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["TRIM_THRESHOLD", "keep_freed_memory"]

TRIM_THRESHOLD = 64 << 20  # bytes of free heap kept for reuse before any goes back
_M_TRIM_THRESHOLD = -1  # mallopt's parameter number (malloc.h)


def keep_freed_memory():
    """Fix glibc's trim threshold at TRIM_THRESHOLD; True when it was set."""
    if not sys.platform.startswith("linux") or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    if os.environ.get("RNNFAST_MALLOC_TRIM", "1") == "0":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    return bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
