"""glibc's malloc gives freed memory at the top of its heap back to the system once more than
its trim threshold (dynamic: twice the largest recent mmap threshold) lies free. A training
loop allocates and frees the same few arrays every batch (kernel outputs, packed weights,
gradients), and which of them lands at the top of the heap depends on everything else the
program allocates in between: in one loop the heap kept its pages, in another (fit's, with a
few more small arrays per batch) it trimmed and re-faulted 117,000 pages per epoch, making the
same kernels run 1.3x longer (bench/layers/variable_length.py, names). A fixed trim threshold keeps up
to that much freed memory for reuse, whatever the allocation order.

Fixing the trim threshold also fixes the mmap threshold (glibc: setting either turns off their
dynamic adjustment) at its initial 128 KiB: every larger array (a (50, 32, 256) float32 batch
is 1.6 MB) is then mapped afresh and its pages faulted in on first write, and unmapped when
freed. A copy of that batch took 0.49 ms instead of 0.10 ms, and a teacher-forced JordanRNN
training step (bench/layers/jordan_vs_rnn.py, T=100, B=32, H=256) 2x longer. So the mmap threshold is
fixed too, at glibc's own upper bound for the dynamic one: arrays below it come from the heap,
whose freed memory the trim threshold keeps.

Set at import on Linux with glibc, unless ``MALLOC_TRIM_THRESHOLD_`` (glibc's own setting) or
``RNNFAST_MALLOC_TRIM=0`` is in the environment; the mmap threshold is left alone where
``MALLOC_MMAP_THRESHOLD_`` is set.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]

TRIM_THRESHOLD = 64 << 20  # bytes of free heap kept for reuse before any goes back
# glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit (the most its dynamic threshold reaches, and the
# most mallopt accepts); larger allocations are still mapped
MMAP_THRESHOLD = 32 << 20
_M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3


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
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD if sys.maxsize > 2**32 else 512 << 10)
    return bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
