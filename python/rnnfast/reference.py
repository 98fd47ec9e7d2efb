"""Pure-NumPy Elman RNN forward and BPTT, written straight from the equations: the test oracle.

    u_t = h_{t-1} * m                                    (m: recurrent dropout mask, else 1)
    a_t = act(W_ih x_t + b_ih + W_hh u_t + b_hh),        act = tanh or relu
    n_t = (1 - alpha) h_{t-1} + alpha a_t                (alpha = 1: the plain Elman unit)
    h_t = n_t where step t of the sequence is kept, else h_{t-1}
    y_t = h_t where kept; else the previous output y_{t-1} (y_{-1} = 0, Keras's default) or,
          with zero_output_for_mask, zeros

With ``lengths``, sequence b is only its first lengths[b] steps: the later ones are not kept and
always output zero, so its h_n is its state after its own last step (h0 when its length is 0).
``step_mask`` (T, B) marks the kept steps (Keras's masks); both given, a step is kept when both
keep it. h_n is the state after the last step.

Deliberately plain (a Python loop over time, no fusion) so that it is easy to check by eye.
"""

from __future__ import annotations

import numpy as np

__all__ = ["rnn_forward", "rnn_backward"]


def _act(name, z):
    return np.tanh(z) if name == "tanh" else np.maximum(z, 0)


def _act_grad_from_output(name, a):
    return 1 - a * a if name == "tanh" else (a > 0).astype(a.dtype)


def _length_mask(lengths, T, B, dtype):
    """(T, B, 1) array: 1 where step t belongs to sequence b."""
    if lengths is None:
        return np.ones((T, B, 1), dtype=dtype)
    return (np.arange(T)[:, None] < np.asarray(lengths)[None, :]).astype(dtype)[:, :, None]


def _masks(lengths, step_mask, T, B, dtype):
    """(in_length, kept), each (T, B, 1) of 0 and 1."""
    in_length = _length_mask(lengths, T, B, dtype)
    kept = (
        in_length
        if step_mask is None
        else in_length * (np.asarray(step_mask).astype(bool).astype(dtype)[:, :, None])
    )
    return in_length, kept


def rnn_forward(
    x,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    h0=None,
    nonlinearity="tanh",
    lengths=None,
    alpha=1.0,
    *,
    step_mask=None,
    zero_output_for_mask=False,
    recurrent_mask=None,
):
    """Forward over x (T, B, D). Returns (y (T, B, H), h_n (B, H))."""
    T, B, _ = x.shape
    H = weight_hh.shape[0]
    dtype = np.result_type(x, weight_ih)
    h = np.zeros((B, H), dtype=dtype) if h0 is None else np.array(h0, dtype=dtype)
    in_length, kept = _masks(lengths, step_mask, T, B, dtype)
    y = np.empty((T, B, H), dtype=dtype)
    y_prev = np.zeros((B, H), dtype=dtype)
    for t in range(T):
        u = h if recurrent_mask is None else h * recurrent_mask
        z = x[t] @ weight_ih.T + u @ weight_hh.T
        if bias_ih is not None:
            z = z + bias_ih
        if bias_hh is not None:
            z = z + bias_hh
        # alpha = 1 is the plain unit: no (1 - alpha) * h term (0 * inf would be NaN)
        a = _act(nonlinearity, z)
        h_new = a if alpha == 1 else (1 - alpha) * h + alpha * a
        h = np.where(kept[t] > 0, h_new, h)  # a skipped step keeps the state
        skipped_output = 0 if zero_output_for_mask or step_mask is None else y_prev
        y[t] = np.where(kept[t] > 0, h, skipped_output) * in_length[t]
        y_prev = y[t]
    return y, h


def _states(y, h0, kept):
    """The states h_t (T, B, H) behind the outputs: a kept step's output is its state, a skipped
    step keeps the state before it."""
    h = h0
    states = np.empty_like(y)
    for t in range(y.shape[0]):
        h = np.where(kept[t] > 0, y[t], h)
        states[t] = h
    return states


def rnn_backward(
    x,
    weight_ih,
    weight_hh,
    y,
    dy=None,
    dh_n=None,
    *,
    h0,
    nonlinearity,
    lengths,
    alpha,
    step_mask,
    zero_output_for_mask,
    recurrent_mask,
):
    """BPTT from the forward's outputs y. Returns (dx, dh0, dweight_ih, dweight_hh, dbias);
    dbias is the gradient of bias_ih and of bias_hh alike. Every forward argument that changes
    the gradient is a keyword without default, as in rnnfast.functional.rnn_backward."""
    T, B, _ = x.shape
    H = weight_hh.shape[0]
    dtype = y.dtype
    in_length, kept = _masks(lengths, step_mask, T, B, dtype)
    # y_t = kept h_t + (1 - kept) carry y_{t-1}, times in_length: carry is 1 where a skipped
    # step repeats the previous output (a step_mask without zero_output_for_mask), else 0.
    carry = 0.0 if zero_output_for_mask or step_mask is None else 1.0
    m = np.ones((B, H), dtype=dtype) if recurrent_mask is None else recurrent_mask
    h_start = np.zeros((B, H), dtype=dtype) if h0 is None else h0
    states = _states(y, h_start, kept)
    # 1 - alpha rounded in the outputs' dtype, as the kernels compute it: relu's slope below
    # compares stored values bit for bit (float32(0.4) != 1 - float32(0.6)).
    leak_keep = dtype.type(1) - dtype.type(alpha)
    dx = np.zeros(x.shape, dtype=dtype)
    dw_ih = np.zeros(weight_ih.shape, dtype=dtype)
    dw_hh = np.zeros(weight_hh.shape, dtype=dtype)
    db = np.zeros(H, dtype=dtype)
    # g: gradient with respect to the state h_t; e: with respect to the output y_t, from the
    # outputs after it that repeat it.
    g = np.zeros((B, H), dtype=dtype) if dh_n is None else np.array(dh_n, dtype=dtype)
    e = np.zeros((B, H), dtype=dtype)
    for t in reversed(range(T)):
        k, n = kept[t], in_length[t]
        if dy is not None:
            e = e + dy[t]
        g = g + n * k * e
        h_prev = states[t - 1] if t > 0 else h_start
        keep_share = leak_keep * h_prev
        if nonlinearity == "relu" and alpha != 1:
            # relu's unit was active iff the output differs from the kept state: comparing the
            # stored values avoids recovering a_t by a division that turns rounding into signs.
            slope = ((y[t] != keep_share) & (y[t] - keep_share > 0)).astype(dtype)
        else:
            a = (y[t] - keep_share) / alpha  # act(z_t), recovered from the outputs
            slope = _act_grad_from_output(nonlinearity, a)
        delta = k * g * alpha * slope
        u = h_prev * m
        dw_ih += delta.T @ x[t]
        dw_hh += delta.T @ u
        db += delta.sum(axis=0)
        dx[t] = delta @ weight_ih
        through_unit = m * (delta @ weight_hh)
        if alpha != 1:
            through_unit = through_unit + (1 - alpha) * g
        g = np.where(k > 0, through_unit, g)
        e = n * (1 - k) * carry * e
    return dx, g, dw_ih, dw_hh, db
