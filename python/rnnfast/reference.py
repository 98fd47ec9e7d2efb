"""Pure-NumPy Elman RNN forward and BPTT, written straight from the equations: the test oracle.

    h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh),   act = tanh or relu

Deliberately plain (a Python loop over time, no fusion) so that it is easy to check by eye.
"""

from __future__ import annotations

import numpy as np

__all__ = ["rnn_forward", "rnn_backward"]


def _act(name, z):
    return np.tanh(z) if name == "tanh" else np.maximum(z, 0)


def _act_grad_from_output(name, h):
    return 1 - h * h if name == "tanh" else (h > 0).astype(h.dtype)


def rnn_forward(x, weight_ih, weight_hh, bias_ih=None, bias_hh=None, h0=None,
                nonlinearity="tanh"):
    """Forward over x (T, B, D). Returns (y (T, B, H), h_n (B, H))."""
    T, B, _ = x.shape
    H = weight_hh.shape[0]
    h = np.zeros((B, H), dtype=x.dtype) if h0 is None else h0
    y = np.empty((T, B, H), dtype=np.result_type(x, weight_ih))
    for t in range(T):
        z = x[t] @ weight_ih.T + h @ weight_hh.T
        if bias_ih is not None:
            z = z + bias_ih
        if bias_hh is not None:
            z = z + bias_hh
        h = _act(nonlinearity, z)
        y[t] = h
    return y, np.array(h, dtype=y.dtype)


def rnn_backward(x, weight_ih, weight_hh, y, dy=None, dh_n=None, h0=None, nonlinearity="tanh"):
    """BPTT from the forward's outputs y. Returns (dx, dh0, dweight_ih, dweight_hh, dbias);
    dbias is the gradient of bias_ih and of bias_hh alike."""
    T, B, _ = x.shape
    H = weight_hh.shape[0]
    h_start = np.zeros((B, H), dtype=y.dtype) if h0 is None else h0
    dx = np.zeros(x.shape, dtype=y.dtype)
    dw_ih = np.zeros(weight_ih.shape, dtype=y.dtype)
    dw_hh = np.zeros(weight_hh.shape, dtype=y.dtype)
    db = np.zeros(H, dtype=y.dtype)
    dh = np.zeros((B, H), dtype=y.dtype) if dh_n is None else np.array(dh_n, dtype=y.dtype)
    for t in reversed(range(T)):
        if dy is not None:
            dh = dh + dy[t]
        delta = dh * _act_grad_from_output(nonlinearity, y[t])
        h_prev = y[t - 1] if t > 0 else h_start
        dw_ih += delta.T @ x[t]
        dw_hh += delta.T @ h_prev
        db += delta.sum(axis=0)
        dx[t] = delta @ weight_ih
        dh = delta @ weight_hh
    return dx, dh, dw_ih, dw_hh, db
