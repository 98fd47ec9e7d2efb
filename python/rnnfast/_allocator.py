"""glibc's malloc gives freed memory at the top of its heap back to the system once more than
its trim threshold (dynamic: twice the largest recent mmap threshold) lies free. A training
loop allocates and frees the same few arrays every batch (kernel outputs, packed weights,
gradients), and which of them lands at the top of the heap depends on everything else the
program allocates in between: in one loop the heap kept its pages, in another (fit's, with a
few more small arrays per batch) it trimmed and re-faulted 117,000 pages per epoch, making the
same kernels run 1.3x longer (bench/variable_length.py, names). A fixed trim threshold keeps up
to that much freed memory for reuse, whatever the allocation order.

Fixing the trim threshold also turns off glibc's dynamic mmap threshold (glibc's malloc.c:
mallopt marks every threshold static), which stays at its 128 KiB default (the glibc manual,
"Malloc Tunable Parameters"): every array above that (a (T, B, H) output of 100 x 64 x 64 float32
is 1.6 MB) was then a fresh mmap, faulted in page by page on every call: 2,000 faults a training
step of that layer (none with RNNFAST_MALLOC_TRIM=0), 2,400 through rnnfast.torch. So the mmap
threshold is fixed too, at the dynamic threshold's own ceiling on 64-bit systems (32 MiB,
DEFAULT_MMAP_THRESHOLD_MAX in malloc.c), unless ``MALLOC_MMAP_THRESHOLD_`` is in the environment:
arrays below it come from the heap and are reused.

Set at import on Linux with glibc, unless ``MALLOC_TRIM_THRESHOLD_`` (glibc's own setting) or
``RNNFAST_MALLOC_TRIM=0`` is in the environment.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]

TRIM_THRESHOLD = 64 << 20  # bytes of free heap kept for reuse before any goes back
MMAP_THRESHOLD = 4 * 1024 * 1024 * 8  # glibc's DEFAULT_MMAP_THRESHOLD_MAX with 8-byte longs
_M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3


def keep_freed_memory():
    """Fix glibc's trim threshold at TRIM_THRESHOLD and its mmap threshold at MMAP_THRESHOLD
    (the latter unless the environment sets it); True when they were set."""
    if not sys.platform.startswith("linux") or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    if os.environ.get("RNNFAST_MALLOC_TRIM", "1") == "0":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    done = bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and done
    return done
