"""The streaming steps' unbatched form, as ``torch.nn.RNNCell``, ``GRUCell`` and ``LSTMCell``
take it: x_t of shape (D,) with states of shape (H,), and states left out (None) as zeros.

The kernels take a batch, (B, D) and (B, H); an unbatched call runs as a batch of one and its
results lose the batch axis again. Only the steps' converting path comes here: the fast path's
kernel call refuses a 1-D x_t or a None state, so it costs the batched call nothing."""

from __future__ import annotations

import numpy as np

__all__ = ["as_batch", "unbatch"]


def as_batch(x_t, states, weight_hh):
    """``(x_t (B, D), states as (B, ·), unbatched)`` of converted arrays: a 1-D x_t gains the
    batch axis, and its states must be 1-D too (as torch's cells insist); a None state is zeros
    of the width weight_hh gives it. ``states``: ``(name, array or None, "h" or "c")``."""
    unbatched = x_t.ndim == 1
    if unbatched:
        x_t = x_t[None]
    # h's width is weight_hh's columns (the LSTM's projection R included); c's the LSTM's H
    ok = weight_hh is not None and weight_hh.ndim == 2
    widths = {"h": weight_hh.shape[1] if ok else 0, "c": weight_hh.shape[0] // 4 if ok else 0}
    batched = []
    for name, state, kind in states:
        if state is None:
            state = np.zeros((x_t.shape[0] if x_t.ndim == 2 else 0, widths[kind]), x_t.dtype)
        elif unbatched:
            if state.ndim != 1:
                raise ValueError(
                    f"{name}: expected 1 dimension ({widths[kind]},) for an unbatched x_t of "
                    f"shape (D,), got shape {state.shape}; give x_t[None] for a batch of one"
                )
            state = state[None]
        batched.append(state)
    return x_t, batched, unbatched


def unbatch(result, unbatched):
    """The kernel's result (an array, or a tuple of them) without the batch axis of one."""
    if not unbatched:
        return result
    if isinstance(result, tuple):
        return tuple(r[0] for r in result)
    return result[0]
