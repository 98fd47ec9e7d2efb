"""Dilated recurrence on the existing kernels (Chang et al., "Dilated Recurrent Neural Networks",
2017; the lecture notes' multiple time scales): ``h_t = act(W_ih x_t + b_ih + W_hh h_{t-d} +
b_hh)`` over (T, B) is d interleaved sequences of ceil(T/d) steps, chain j holding the steps
t = j, j + d, j + 2d, ..., run as one batch of d*B rows. Chain j of sequence b is row j*B + b.

A time-major (T, B, ...) array with T a multiple of d is already laid out as (T/d, d, B, ...),
so the chains are a reshape of it, no copy; otherwise the tail is padded (a copy) and the
padded steps lie past every chain's length.

Streaming (``step``, stateful layers): step t reads h_{t-d}, so what carries a dilated layer from
one call to the next is its last d states, a ring (d, B, S) in age order: ``ring[j]`` is
h_{t-d+j} when step t comes next (``ring[-1]`` the newest). Chain j of the next call starts from
``ring[j]``, which makes the ring exactly the per-chain initial state of the chain layout. S is
the cell's joined state width (nn.cells: H; an LSTM's h and c side by side, R + H): everything
here is cell-agnostic.

Dropout masks are drawn one per sequence; each chain of a sequence reads its sequence's
(:func:`chain_masks`).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "chain_h0",
    "chain_lengths",
    "chain_masks",
    "chain_state_gradient",
    "from_chains",
    "last_rows",
    "ring_from_chains",
    "to_chains",
]


def to_chains(a, d, fill=0):
    """(T, B, ...) -> (ceil(T/d), d*B, ...): row j*B + b of step s is a[s*d + j, b]."""
    if a is None:
        return None
    steps, batch = a.shape[0], a.shape[1]
    padded = -(-steps // d) * d
    if padded != steps:
        pad = np.full((padded - steps,) + a.shape[1:], fill, dtype=a.dtype)
        a = np.concatenate([a, pad], axis=0)
    a = np.ascontiguousarray(a)
    return a.reshape((padded // d, d * batch) + a.shape[2:])


def from_chains(a, d, steps):
    """The inverse of :func:`to_chains`: (S, d*B, ...) -> (steps, B, ...), a view."""
    s, rows = a.shape[0], a.shape[1]
    return a.reshape((s * d, rows // d) + a.shape[2:])[:steps]


def chain_lengths(lengths, steps, batch, d):
    """(d*B,) lengths of the chains: chain j of a sequence of length L holds the steps j, j+d,
    ... below L, ceil((L - j) / d) of them (0 when L <= j). Without lengths every sequence
    has T steps (and the padding of to_chains lies past them)."""
    full = np.full(batch, steps, dtype=np.int64) if lengths is None else lengths
    j = np.arange(d, dtype=np.int64)[:, None]
    return np.maximum(0, -(-(full[None, :] - j) // d)).reshape(-1)


def last_rows(lengths, steps, batch, d):
    """(B,) the chain row that holds each sequence's last step, (L - 1) mod d (an empty
    sequence's: any chain, they all end at h0)."""
    full = np.full(batch, steps, dtype=np.int64) if lengths is None else lengths
    return ((full - 1) % d) * batch + np.arange(batch)


def chain_h0(h0, d):
    """The chains' initial states (d*B, S): one state (B, S) broadcast to every chain, or a
    ring (d, B, S), one per chain (row j*B + b is ring[j, b]: a reshape)."""
    if h0 is None:
        return None
    if h0.ndim == 3:
        return np.ascontiguousarray(h0).reshape(-1, h0.shape[2])
    return np.tile(h0, (d, 1))


def chain_masks(mask, d):
    """Dropout masks in the chain layout: one per sequence, (..., B, W) -> (..., d*B, W) along
    the batch axis (-2), row j*B + b being sequence b's (every chain of a sequence reads its
    sequence's mask). The Elman cell's (B, H); a gated cell's one per gate (gates, B, W)."""
    if mask is None:
        return None
    return np.tile(mask, (1,) * (mask.ndim - 2) + (d, 1))


def chain_state_gradient(dh_n, last, d):
    """The gradient of each sequence's h_n (B, S) as one of the chains' final states
    (d*B, S): h_n is the final state of the chain that holds the sequence's last step (row
    ``last``, from :func:`last_rows`); the other chains' final states have none."""
    chained = np.zeros((d * dh_n.shape[0], dh_n.shape[1]), dtype=dh_n.dtype)
    chained[last] = dh_n
    return chained


def ring_from_chains(h_n, lengths, steps, batch, d):
    """The ring (d, B, S) of the last d states of each sequence from the chains' final states
    h_n (d*B, S): position L - d + j (L the sequence's length) is the last step of chain
    (L + j) mod d, or, when negative, a chain that never ran and still holds its initial
    state, which is the incoming ring's entry L + j = (L + j) mod d. One gather either way."""
    full = np.full(batch, steps, dtype=np.int64) if lengths is None else lengths
    chain = (full[None, :] + np.arange(d, dtype=np.int64)[:, None]) % d
    return h_n[chain * batch + np.arange(batch)]
