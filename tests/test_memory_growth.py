"""No memory grows with the number of calls: 10,000 forward+backward calls leave the process's
resident set within 1 MB of where it was after a warm-up.

A leak of even one small buffer per call (an output array whose reference is never dropped, a
packed copy of W_hh, a per-call thread-team allocation) shows here as 10,000 x its size.
"""

from __future__ import annotations

import gc
import os
import sys

import numpy as np
import pytest
from conftest import PLAIN

import rnnfast
from rnnfast import functional as F

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm"),
    # ASan keeps freed memory in quarantine (256 MB) and its shadow grows with it: RSS is not a
    # leak measure there (tools/sanitize.sh runs with detect_leaks=0; valgrind covers leaks).
    pytest.mark.skipif(
        "libasan" in os.environ.get("LD_PRELOAD", ""),
        reason="RSS under AddressSanitizer is not a leak measure",
    ),
]

CALLS = 10_000
LIMIT = 1 << 20  # bytes
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    """Resident set size in bytes, now (not the peak: ru_maxrss would hide a freed spike but
    also a late growth below an early peak)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def _window(fn, calls):
    gc.collect()
    before = rss()
    for _ in range(calls):
        fn()
    gc.collect()
    return rss() - before


def growth(fn, calls=CALLS, warmup=500):
    """RSS growth over `calls` calls of fn after `warmup` calls, in bytes. Where it reaches
    LIMIT, a second window of `calls` calls is measured and the smaller growth returned: a leak
    grows in every window, while a one-off allocation elsewhere in the process (seen once in a
    full run: 1.8 MB in one window, none in 60,000 calls of the same case alone) shows in one."""
    for _ in range(warmup):
        fn()
    grew = _window(fn, calls)
    return grew if grew < LIMIT else min(grew, _window(fn, calls))


def _functional_call(dtype, lengths, alpha, return_sequences, masks=False):
    rng = np.random.default_rng(0)
    T, B, D, H = 5, 3, 4, 8
    x = rng.standard_normal((T, B, D)).astype(dtype)
    w_ih = (0.3 * rng.standard_normal((H, D))).astype(dtype)
    w_hh = (0.3 * rng.standard_normal((H, H))).astype(dtype)
    b_ih = rng.standard_normal(H).astype(dtype)
    b_hh = rng.standard_normal(H).astype(dtype)
    h0 = rng.standard_normal((B, H)).astype(dtype)
    dy = rng.standard_normal((T, B, H)).astype(dtype)
    dh_n = rng.standard_normal((B, H)).astype(dtype)
    lens = None if lengths is None else np.asarray(lengths)
    # the masked drivers (general step mask, recurrent dropout) allocate tables of their own
    options = {
        **PLAIN,
        "lengths": lens,
        "alpha": alpha,
        "step_mask": rng.random((T, B)) < 0.6 if masks else None,
        "recurrent_mask": (rng.random((B, H)) < 0.7).astype(dtype) if masks else None,
    }

    def call():
        y, h_n = F.rnn_forward(
            x, w_ih, w_hh, b_ih, b_hh, h0, return_sequences=return_sequences, **options
        )
        if y is None:
            y, h_n = F.rnn_forward(x, w_ih, w_hh, b_ih, b_hh, h0, **options)
        F.rnn_backward(x, w_ih, w_hh, y, dy, dh_n, h0=h0, **options)
        F.rnn_step(x[0], h_n, w_ih, w_hh, b_ih, b_hh, alpha=alpha)

    return call


@pytest.mark.parametrize(
    "dtype, lengths, alpha, return_sequences, masks",
    [
        (np.float32, None, 1.0, True, False),
        # unsorted lengths (the reordering path), leaky units, last-state-only forward
        (np.float64, [2, 5, 0], 0.5, False, False),
        (np.float32, [2, 5, 0], 1.0, True, True),
    ],
    ids=["float32-plain", "float64-lengths-leaky-last", "float32-masks"],
)
def test_functional_forward_backward_does_not_grow(dtype, lengths, alpha, return_sequences, masks):
    grew = growth(_functional_call(dtype, lengths, alpha, return_sequences, masks))
    assert grew < LIMIT, f"RSS grew by {grew / 1024:.0f} KiB over {CALLS} calls"


def test_rnn_layer_forward_backward_does_not_grow():
    rng = np.random.default_rng(1)
    # Two layers (so dropout between them runs), one direction: the kernels are the same per
    # direction, and this keeps 10,000 calls within a few seconds.
    layer = rnnfast.RNN(4, 6, num_layers=2, dropout=0.2, seed=0, batch_first=True)
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)  # (B, T, D)
    lengths = np.array([5, 2, 4])
    d_y = rng.standard_normal((3, 5, 6)).astype(np.float32)

    def call():
        layer.zero_grad()
        layer(x, lengths=lengths)
        layer.backward(d_y)

    grew = growth(call)
    assert grew < LIMIT, f"RSS grew by {grew / 1024:.0f} KiB over {CALLS} calls"


def test_threaded_calls_do_not_grow():
    """The same with more than one thread, so the kernels' parallel regions run."""
    call = _functional_call(np.float32, None, 1.0, True)
    with rnnfast.threads(2):
        grew = growth(call, calls=CALLS // 2)
    assert grew < LIMIT, f"RSS grew by {grew / 1024:.0f} KiB over {CALLS // 2} calls"
