"""Pure-NumPy Elman RNN forward and BPTT, written straight from the equations: the test oracle.

    a_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh),   act = tanh or relu
    h_t = (1 - alpha) h_{t-1} + alpha a_t                (alpha = 1: the plain Elman unit)

With ``lengths``, sequence b is only its first lengths[b] steps: later outputs are zero and its
h_n is its state after its own last step (h0 when its length is 0).

Deliberately plain (a Python loop over time, no fusion) so that it is easy to check by eye.
"""

from __future__ import annotations

import numpy as np

__all__ = ["rnn_forward", "rnn_backward"]


def _act(name, z):
    return np.tanh(z) if name == "tanh" else np.maximum(z, 0)


def _act_grad_from_output(name, a):
    return 1 - a * a if name == "tanh" else (a > 0).astype(a.dtype)


def _step_mask(lengths, T, B, dtype):
    """(T, B, 1) array: 1 where step t belongs to sequence b."""
    if lengths is None:
        return np.ones((T, B, 1), dtype=dtype)
    return (np.arange(T)[:, None] < np.asarray(lengths)[None, :]).astype(dtype)[:, :, None]


def rnn_forward(x, weight_ih, weight_hh, bias_ih=None, bias_hh=None, h0=None,
                nonlinearity="tanh", lengths=None, alpha=1.0):
    """Forward over x (T, B, D). Returns (y (T, B, H), h_n (B, H))."""
    T, B, _ = x.shape
    H = weight_hh.shape[0]
    dtype = np.result_type(x, weight_ih)
    h = np.zeros((B, H), dtype=dtype) if h0 is None else np.array(h0, dtype=dtype)
    mask = _step_mask(lengths, T, B, dtype)
    y = np.empty((T, B, H), dtype=dtype)
    for t in range(T):
        z = x[t] @ weight_ih.T + h @ weight_hh.T
        if bias_ih is not None:
            z = z + bias_ih
        if bias_hh is not None:
            z = z + bias_hh
        # alpha = 1 is the plain unit: no (1 - alpha) * h term (0 * inf would be NaN)
        a = _act(nonlinearity, z)
        h_new = a if alpha == 1 else (1 - alpha) * h + alpha * a
        h = np.where(mask[t] > 0, h_new, h)  # a finished sequence keeps its last state
        y[t] = h * mask[t]
    return y, h


def rnn_backward(x, weight_ih, weight_hh, y, dy=None, dh_n=None, h0=None, nonlinearity="tanh",
                 lengths=None, alpha=1.0):
    """BPTT from the forward's outputs y. Returns (dx, dh0, dweight_ih, dweight_hh, dbias);
    dbias is the gradient of bias_ih and of bias_hh alike."""
    T, B, _ = x.shape
    H = weight_hh.shape[0]
    dtype = y.dtype
    mask = _step_mask(lengths, T, B, dtype)
    h_start = np.zeros((B, H), dtype=dtype) if h0 is None else h0
    dx = np.zeros(x.shape, dtype=dtype)
    dw_ih = np.zeros(weight_ih.shape, dtype=dtype)
    dw_hh = np.zeros(weight_hh.shape, dtype=dtype)
    db = np.zeros(H, dtype=dtype)
    # g: gradient with respect to the state h_t (of each sequence still running, or carried).
    g = np.zeros((B, H), dtype=dtype) if dh_n is None else np.array(dh_n, dtype=dtype)
    for t in reversed(range(T)):
        m = mask[t]
        if dy is not None:
            g = g + dy[t] * m
        h_prev = y[t - 1] if t > 0 else h_start
        if lengths is not None and t > 0:  # y is zeroed after a sequence ends; its state is not
            h_prev = np.where(mask[t - 1] > 0, h_prev, h_start)
        kept = (1 - alpha) * h_prev
        if nonlinearity == "relu" and alpha != 1:
            # relu's unit was active iff the output differs from the kept state: comparing the
            # stored values avoids recovering a_t by a division that turns rounding into signs.
            slope = ((y[t] != kept) & (y[t] - kept > 0)).astype(dtype)
        else:
            a = (y[t] - kept) / alpha  # act(z_t), recovered from the outputs
            slope = _act_grad_from_output(nonlinearity, a)
        delta = g * alpha * slope * m
        dw_ih += delta.T @ x[t]
        dw_hh += delta.T @ h_prev
        db += delta.sum(axis=0)
        dx[t] = delta @ weight_ih
        g = np.where(m > 0, (1 - alpha) * g + delta @ weight_hh, g)
    return dx, g, dw_ih, dw_hh, db
