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
the cell's joined state width (nn.recurrent.cells: H; an LSTM's h and c side by side, R + H): everything
here is cell-agnostic.

A ring may be shorter than d: (m, B, S) with 1 <= m <= d stands for the full ring whose first
d - m + 1 entries are all its ``ring[0]`` (the states before the first step are the initial
state). Rings grow as steps arrive: a layer that started from one state (zeros, or a plain h0)
carries min(d, 1 + steps seen) states, never d of them up front, so a dilation of 10**9 costs
what the steps cost (:func:`push`, :func:`ring_from_chains`).

Work and memory are O(T * B * S) whatever d: when d >= T no step reads another step's state, so
a call over T steps lays its chains out with :func:`effective_dilation` chains, not d: each
chain holds at most one step, and chain j starts from the full ring's entry j.

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
    "effective_dilation",
    "from_chains",
    "last_rows",
    "push",
    "ring_from_chains",
    "ring_gradient",
    "ring_index",
    "to_chains",
    "widen",
]


def effective_dilation(d, steps, per_chain=False):
    """The number of chains a call over ``steps`` steps runs for a dilation ``d``: d itself when
    d < steps; otherwise ``steps`` (each chain holds at most one step, the same result as d
    chains, d - steps of which would hold none), or ``steps + 1`` when each chain starts from its
    own state (a ring h0): the extra chain, holding no step, starts from the ring's newest entry,
    which is then the h_n of an empty sequence and takes its gradient."""
    return max(1, min(d, steps + (1 if per_chain else 0)))


def ring_index(d, m, chains):
    """(chains,) the entry of a ring of length ``m`` (1 <= m <= d, the short form: its first
    entry stands for the d - m + 1 oldest) each chain of a call starts from: chain j < chains
    starts from the full ring's entry j, and when the chains are fewer than d
    (:func:`effective_dilation`) the last chain from its entry d - 1, the newest."""
    full = np.arange(chains, dtype=np.int64)
    if chains < d:
        full[-1] = d - 1
    return np.maximum(0, full - (d - m))


def widen(ring, m):
    """A ring (short form) as one of ``m >= len(ring)`` entries: its oldest repeated in front
    (the same full ring)."""
    extra = m - ring.shape[0]
    if extra <= 0:
        return ring
    return np.concatenate([np.broadcast_to(ring[:1], (extra,) + ring.shape[1:]), ring])


def push(ring, state, d):
    """The ring after one step that produced ``state`` (B, S): the newest entry appended, and
    the oldest dropped once the ring holds d (a short ring grows by one)."""
    kept = ring[1:] if ring.shape[0] >= d else ring
    return np.concatenate([kept, state[None]])


def ring_gradient(dh0, index, m):
    """The gradient of a ring of length ``m`` from its chains' initial-state gradients dh0
    (chains, B, S), chain j having started from entry ``index[j]`` (:func:`ring_index`)."""
    out = np.zeros((m,) + dh0.shape[1:], dtype=dh0.dtype)
    np.add.at(out, index, dh0)
    return out


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


def chain_h0(h0, d, index=None):
    """The chains' initial states (d*B, S), d chains: one state (B, S) broadcast to every
    chain, or a ring (m, B, S), chain j starting from ``ring[index[j]]`` (:func:`ring_index`;
    row j*B + b is ring[index[j], b])."""
    if h0 is None:
        return None
    if h0.ndim == 3:
        if index is not None and not np.array_equal(index, np.arange(h0.shape[0])):
            h0 = h0[index]
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


def ring_from_chains(h_n, lengths, steps, batch, d, chains, ring):
    """The ring of the last min(d, m + steps) states of each sequence (the short form, m the
    incoming ``ring``'s length) from the final states h_n (chains*B, S) of the call's
    ``chains`` chains (:func:`effective_dilation`) and the incoming ring (m, B, S) it started
    from (a plain h0 is a ring of one). Position p = L - m_out + i (L the sequence's length)
    is, when p >= 0, the last step of chain p mod chains (each of the last d steps is the last
    of its chain; with chains >= steps each chain holds one step), and otherwise the incoming
    ring's entry m + p (its first for anything older). One gather from each."""
    full = np.full(batch, steps, dtype=np.int64) if lengths is None else lengths
    m = ring.shape[0]
    size = min(d, m + steps)
    p = full[None, :] - size + np.arange(size, dtype=np.int64)[:, None]
    cols = np.arange(batch)
    out = ring[np.clip(m + p, 0, m - 1), cols]
    ran = p >= 0
    out[ran] = h_n[((p % chains) * batch + cols)[ran]]
    return out
