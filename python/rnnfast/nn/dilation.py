"""Dilated recurrence on the existing kernels (Chang et al., "Dilated Recurrent Neural Networks",
2017; the lecture notes' multiple time scales): ``h_t = act(W_ih x_t + b_ih + W_hh h_{t-d} +
b_hh)`` over (T, B) is d interleaved sequences of ceil(T/d) steps, chain j holding the steps
t = j, j + d, j + 2d, ..., run as one batch of d*B rows. Chain j of sequence b is row j*B + b.

A time-major (T, B, ...) array with T a multiple of d is already laid out as (T/d, d, B, ...),
so the chains are a reshape of it, no copy; otherwise the tail is padded (a copy) and the
padded steps lie past every chain's length.
"""

from __future__ import annotations

import numpy as np

__all__ = ["chain_h0", "chain_lengths", "from_chains", "last_rows", "to_chains"]


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
    """One initial state (B, H) for every chain: (d*B, H)."""
    return None if h0 is None else np.tile(h0, (d, 1))
