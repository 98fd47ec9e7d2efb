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

The gated cells (GRU, LSTM; PyTorch's gate orders r, z, n and i, f, g, o) follow the contract
of spec/gated_api.md, with the same signatures as rnnfast.functional's kernels:

    GRU:  r = ra(W_ir x + b_ir + W_hr h + b_hr),  z = ra(W_iz x + b_iz + W_hz h + b_hz)
          n = act(W_in x + b_in + r * (W_hn h + b_hn))        (reset_after=True, PyTorch's)
          n = act(W_in x + b_in + W_hn (r * h) + b_hn)        (reset_after=False, Keras's)
          h' = (1 - z) * n + z * h
    LSTM: i, f, o = ra(.), g = act(.) of W_i* x + b_i* + W_h* h + b_h* (per gate block)
          c' = f * c + i * g,  m = o * act(c'),  h' = m, or weight_hr m with a projection

ra = sigmoid or hard_sigmoid (Keras 3's clip(x / 6 + 1/2, 0, 1)), act = tanh or relu. With
``lengths`` the same rule as above: past its length a sequence outputs zeros and keeps its state.
Their backwards recompute the forward from the inputs (they need no workspace, and ignore one).
``recurrent_mask`` (G, B, R) is Keras 3's recurrent dropout (its implementation=1 cells), one
mask per gate in the order above, used as given (0 or 1/(1-p)): gate g's recurrent term reads
h * recurrent_mask[g] instead of h at every step (the GRU's reset_after=False form: W_hn (r * h
* m_n)); the GRU's update z h and the LSTM's c are never masked. ``input_mask`` (G, B, D) is its
input dropout (``dropout``), the same way on x: gate g's input term is W_ig (x_t *
input_mask[g]) + b_ig at every step. None: no mask (the same bits as all-ones).

Deliberately plain (a Python loop over time, no fusion) so that it is easy to check by eye.
"""

from __future__ import annotations

import numpy as np

from .functional import GatedOutput, GRUGrads, LSTMGrads

__all__ = [
    "rnn_forward",
    "rnn_backward",
    "gru_forward",
    "gru_backward",
    "gru_step",
    "lstm_forward",
    "lstm_backward",
    "lstm_step",
    "deep_transition_forward",
    "deep_transition_backward",
    "layer_norm_lstm_forward",
    "lstm_form_forward",
]


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


# ---- gated cells: GRU and LSTM ------------------------------------------------------------------

_ACTIVATIONS = ("tanh", "relu")
_RECURRENT_ACTIVATIONS = ("sigmoid", "hard_sigmoid")


def _check_names(activation, recurrent_activation):
    """An unknown name would otherwise silently run another function (_act reads all but tanh
    as relu)."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation: expected one of {_ACTIVATIONS}, got {activation!r}")
    if recurrent_activation not in _RECURRENT_ACTIVATIONS:
        raise ValueError(
            f"recurrent_activation: expected one of {_RECURRENT_ACTIVATIONS}, "
            f"got {recurrent_activation!r}"
        )


def _gate(name, a):
    """The recurrent activation of the pre-activation ``a``."""
    if name == "hard_sigmoid":
        return np.clip(a / 6 + 0.5, 0, 1)
    e = np.exp(-np.abs(a))  # exp of -|a| only: exp(-a) overflows (a warning) for large -a
    return np.where(a >= 0, 1 / (1 + e), e / (1 + e))


def _gate_grad_from_output(name, s):
    """The recurrent activation's derivative, from its output ``s``: hard_sigmoid's is 1/6
    strictly inside the clip (0 < s < 1) and 0 where it clips."""
    if name == "hard_sigmoid":
        return ((s > 0) & (s < 1)).astype(s.dtype) / 6
    return s * (1 - s)


def _linear(v, weight, bias):
    out = v @ weight.T
    return out if bias is None else out + bias


def _cast(dtype, *arrays):
    return [None if a is None else np.asarray(a, dtype=dtype) for a in arrays]


def _gate_masks(mask, G, B, W, dtype, name="recurrent_mask"):
    """The per-gate dropout masks (G, B, W) in ``dtype`` (``name``: the argument, for the
    error); ones for None (v * 1 is v exactly, so None and all-ones give the same bits)."""
    if mask is None:
        return np.ones((G, B, W), dtype=dtype)
    mask = np.asarray(mask, dtype=dtype)
    if mask.shape != (G, B, W):
        raise ValueError(f"{name}: expected shape {(G, B, W)}, got {mask.shape}")
    return mask


def _per_gate(u, weight, bias):
    """The gates' terms (B, G*H): gate g's block is u[g] @ weight[g]^T + bias[g], with u
    (G, B, K) the (masked) x or h each gate reads and weight's row blocks the gates'."""
    G = u.shape[0]
    blocks = np.split(weight, G, axis=0)
    out = np.concatenate([u[g] @ blocks[g].T for g in range(G)], axis=1)
    return out if bias is None else out + bias


def _per_gate_backward(d, u, mask, weight, dweight, grad, gates=None):
    """The backward of :func:`_per_gate`'s products through its first ``gates`` gate blocks
    (None: all), from ``d`` (B, G*H), the gradient of its output: adds gate g's weight
    gradient d_g^T u[g] into ``dweight``'s row block g, and returns ``grad`` plus what reaches
    the x or h that u[g] = (x or h) * mask[g] masks, gate after gate."""
    G = u.shape[0]
    H = weight.shape[0] // G
    for g in range(G if gates is None else gates):
        rows = slice(g * H, (g + 1) * H)
        dweight[rows] += d[:, rows].T @ u[g]
        grad = grad + mask[g] * (d[:, rows] @ weight[rows])
    return grad


def _gated_masks(masks, T, B):
    """(kept, out), each (T, B, 1) bool, from masks = (lengths, step_mask, zero_output): step t
    of sequence b updates its states where kept (within its length and kept by the mask); y_t
    is its state h_t where out, else zeros. A skipped step repeats its previous output, which
    is its state (carried) once a step has been kept, zeros before; with zero_output a skipped
    step outputs zeros; past its length, zeros."""
    lengths, step_mask, zero_output = masks
    in_length = _length_mask(lengths, T, B, np.float64) > 0
    kept = in_length
    if step_mask is not None:
        kept = kept & np.asarray(step_mask).astype(bool)[:, :, None]
    if zero_output:
        return kept, kept
    seen = np.cumsum(kept, axis=0) > 0
    return kept, seen & in_length


def _scan(cell, x, state, masks):
    """Run ``cell(x_t, *state) -> (new_state, cache)`` over x (T, B, D) from ``state`` (a
    tuple whose first part is h), under masks = (lengths, step_mask, zero_output) (see
    :func:`_gated_masks`). A skipped step keeps its states, and its cell reads zeros instead of
    the padding (which may hold anything, NaN included, and so never reaches a gradient).
    Returns (y (T, B, R), final state, caches)."""
    T, B, _ = x.shape
    kept, out = _gated_masks(masks, T, B)
    y = np.zeros((T, B, state[0].shape[1]), dtype=x.dtype)
    caches = []
    for t in range(T):
        x_t = np.where(kept[t], x[t], 0)
        new_state, cache = cell(x_t, *state)
        state = tuple(np.where(kept[t], new, old) for new, old in zip(new_state, state))
        y[t] = np.where(out[t], state[0], 0)
        caches.append(cache)
    return y, state, caches


def _gru_cell(
    x_t,
    h,
    w_ih,
    w_hh,
    b_ih,
    b_hh,
    reset_after,
    activation,
    recurrent_activation,
    mask=None,
    input_mask=None,
):
    """One GRU step of every row: ((h',), cache) with what the backward needs. ``mask``,
    ``input_mask``: the recurrent (3, B, H) and input (3, B, D) dropout masks, None for none."""
    H = w_hh.shape[0] // 3
    mask = _gate_masks(mask, 3, *h.shape, h.dtype)
    input_mask = _gate_masks(input_mask, 3, *x_t.shape, x_t.dtype, "input_mask")
    u = h * mask  # u[g]: the h that gate g's recurrent term reads
    v = x_t * input_mask  # v[g]: the x that gate g's input term reads
    x_r, x_z, x_n = np.split(_per_gate(v, w_ih, b_ih), 3, axis=1)
    h_r, h_z, h_n = np.split(_per_gate(u, w_hh, b_hh), 3, axis=1)
    r = _gate(recurrent_activation, x_r + h_r)
    z = _gate(recurrent_activation, x_z + h_z)
    if reset_after:
        n = _act(activation, x_n + r * h_n)  # h_n = W_hn u_n + b_hn
    else:
        b_hn = None if b_hh is None else b_hh[2 * H :]
        h_n = _linear(r * u[2], w_hh[2 * H :], b_hn)  # W_hn (r * u_n) + b_hn
        n = _act(activation, x_n + h_n)
    h_new = (1 - z) * n + z * h  # the unmasked h
    cache = {"x": x_t, "h": h, "mask": mask, "u": u, "input_mask": input_mask, "v": v}
    cache |= {"r": r, "z": z, "n": n, "h_n": h_n}
    return (h_new,), cache


def _lstm_cell(
    x_t,
    h,
    c,
    w_ih,
    w_hh,
    b_ih,
    b_hh,
    w_hr,
    activation,
    recurrent_activation,
    mask=None,
    input_mask=None,
):
    """One LSTM step of every row: ((h', c'), cache) with what the backward needs. ``mask``,
    ``input_mask``: the recurrent (4, B, R) and input (4, B, D) dropout masks, None for none."""
    mask = _gate_masks(mask, 4, *h.shape, h.dtype)
    input_mask = _gate_masks(input_mask, 4, *x_t.shape, x_t.dtype, "input_mask")
    u = h * mask  # u[g]: the h that gate g's recurrent term reads
    v = x_t * input_mask  # v[g]: the x that gate g's input term reads
    a = _per_gate(v, w_ih, b_ih) + _per_gate(u, w_hh, b_hh)
    a_i, a_f, a_g, a_o = np.split(a, 4, axis=1)
    i = _gate(recurrent_activation, a_i)
    f = _gate(recurrent_activation, a_f)
    g = _act(activation, a_g)
    o = _gate(recurrent_activation, a_o)
    c_new = f * c + i * g
    act_c = _act(activation, c_new)
    m = o * act_c
    h_new = m if w_hr is None else m @ w_hr.T
    cache = {"x": x_t, "h": h, "mask": mask, "u": u, "input_mask": input_mask, "v": v}
    cache |= {"c": c, "i": i, "f": f, "g": g, "o": o}
    cache |= {"act_c": act_c, "m": m}
    return (h_new, c_new), cache


def _gru_run(
    x,
    weight_ih,
    weight_hh,
    bias_ih,
    bias_hh,
    h0,
    masks,
    options,
    recurrent_mask=None,
    input_mask=None,
):
    """The GRU forward in x's and weight_ih's dtype: (y, h_n, caches, cast weights)."""
    _check_names(options["activation"], options["recurrent_activation"])
    dtype = np.result_type(x, weight_ih)
    x, w_ih, w_hh, b_ih, b_hh, h0 = _cast(dtype, x, weight_ih, weight_hh, bias_ih, bias_hh, h0)
    B = x.shape[1]
    H = w_hh.shape[1]
    h = np.zeros((B, H), dtype=dtype) if h0 is None else h0
    mask = _gate_masks(recurrent_mask, 3, B, H, dtype)
    in_mask = _gate_masks(input_mask, 3, B, x.shape[2], dtype, "input_mask")
    y, (h_n,), caches = _scan(
        lambda x_t, h: _gru_cell(
            x_t, h, w_ih, w_hh, b_ih, b_hh, **options, mask=mask, input_mask=in_mask
        ),
        x,
        (h,),
        masks,
    )
    return y, h_n, caches, (w_ih, w_hh)


def _lstm_run(
    x,
    weight_ih,
    weight_hh,
    bias_ih,
    bias_hh,
    h0,
    c0,
    masks,
    weight_hr,
    options,
    recurrent_mask=None,
    input_mask=None,
):
    """The LSTM forward in x's and weight_ih's dtype: (y, h_n, c_n, caches, cast weights)."""
    _check_names(options["activation"], options["recurrent_activation"])
    dtype = np.result_type(x, weight_ih)
    x, w_ih, w_hh, b_ih, b_hh, w_hr, h0, c0 = _cast(
        dtype, x, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr, h0, c0
    )
    B = x.shape[1]
    H, R = w_hh.shape[0] // 4, w_hh.shape[1]
    h = np.zeros((B, R), dtype=dtype) if h0 is None else h0
    c = np.zeros((B, H), dtype=dtype) if c0 is None else c0
    mask = _gate_masks(recurrent_mask, 4, B, R, dtype)
    in_mask = _gate_masks(input_mask, 4, B, x.shape[2], dtype, "input_mask")
    y, (h_n, c_n), caches = _scan(
        lambda x_t, h, c: _lstm_cell(
            x_t, h, c, w_ih, w_hh, b_ih, b_hh, w_hr, **options, mask=mask, input_mask=in_mask
        ),
        x,
        (h, c),
        masks,
    )
    return y, h_n, c_n, caches, (w_ih, w_hh, w_hr)


def gru_forward(
    x,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    h0=None,
    lengths=None,
    *,
    reset_after=True,
    activation="tanh",
    recurrent_activation="sigmoid",
    return_sequences=True,
    keep_workspace=False,
    step_mask=None,
    zero_output_for_mask=False,
    recurrent_mask=None,
    input_mask=None,
):
    """GRU forward over x (T, B, D); weight_ih (3H, D), weight_hh (3H, H), biases (3H,), h0
    (B, H), recurrent_mask (3, B, H), input_mask (3, B, D), in gate order r, z, n. Computes in
    ``np.result_type(x, weight_ih)``.

    Returns GatedOutput(y (T, B, H) or None without return_sequences, h_n (B, H), None, None):
    the reference keeps no workspace (its backward recomputes the forward), whatever
    ``keep_workspace`` says."""
    options = {
        "reset_after": reset_after,
        "activation": activation,
        "recurrent_activation": recurrent_activation,
    }
    masks = (lengths, step_mask, zero_output_for_mask)
    y, h_n, _, _ = _gru_run(
        x, weight_ih, weight_hh, bias_ih, bias_hh, h0, masks, options, recurrent_mask, input_mask
    )
    return GatedOutput(y if return_sequences else None, h_n, None, None)


def gru_backward(
    x,
    weight_ih,
    weight_hh,
    bias_ih,
    bias_hh,
    y,
    workspace,
    dy=None,
    dh_n=None,
    *,
    h0,
    lengths,
    reset_after,
    activation,
    recurrent_activation,
    step_mask,
    zero_output_for_mask,
    recurrent_mask,
    input_mask,
    input_gradient=True,
):
    """BPTT of :func:`gru_forward` from the loss's gradients ``dy`` (T, B, H) and ``dh_n``
    (B, H) (None: zeros; dy at padded steps is ignored). The forward is recomputed from the
    inputs: ``workspace`` is ignored (a kernel's is accepted and unread), ``y`` only checked.

    Returns GRUGrads(dx (T, B, D) or None without input_gradient, dh0 (B, H), dweight_ih,
    dweight_hh, dbias_ih, dbias_hh); both bias gradients whether or not the biases exist.

    Raises ValueError when ``y`` is None (a forward without return_sequences)."""
    if y is None:
        raise ValueError("y is None: the backward needs a forward run with return_sequences=True")
    options = {
        "reset_after": reset_after,
        "activation": activation,
        "recurrent_activation": recurrent_activation,
    }
    masks = (lengths, step_mask, zero_output_for_mask)
    y, _, caches, (w_ih, w_hh) = _gru_run(
        x, weight_ih, weight_hh, bias_ih, bias_hh, h0, masks, options, recurrent_mask, input_mask
    )
    T, B, H = y.shape
    dtype = y.dtype
    kept, out = _gated_masks(masks, T, B)
    dy, dh_n = _cast(dtype, dy, dh_n)
    dx = np.zeros((T, B, x.shape[2]), dtype=dtype)
    dw_ih, dw_hh = np.zeros_like(w_ih), np.zeros_like(w_hh)
    db_ih, db_hh = np.zeros(3 * H, dtype=dtype), np.zeros(3 * H, dtype=dtype)
    ra = recurrent_activation
    # dh: gradient with respect to the state h_t, carried back through the steps
    dh = np.zeros((B, H), dtype=dtype) if dh_n is None else dh_n.copy()
    for t in reversed(range(T)):
        k = kept[t]
        if dy is not None:
            dh = dh + np.where(out[t], dy[t], 0)
        s = caches[t]
        d_new = np.where(k, dh, 0)  # a padded step's state is the one before it
        # h' = (1 - z) n + z h
        dn = d_new * (1 - s["z"])
        dz = d_new * (s["h"] - s["n"])
        dh_prev = d_new * s["z"]
        da_n = dn * _act_grad_from_output(activation, s["n"])
        u, mask = s["u"], s["mask"]  # u[g] = h * mask[g]: what gate g's recurrent term read
        if reset_after:
            # n = act(x_n + r * h_n), h_n = W_hn u_n + b_hn
            dr = da_n * s["h_n"]
            da_hn = da_n * s["r"]
        else:
            # n = act(x_n + W_hn (r * u_n) + b_hn)
            d_ru = da_n @ w_hh[2 * H :]
            dr = d_ru * u[2]
            dh_prev = dh_prev + mask[2] * (d_ru * s["r"])
            dw_hh[2 * H :] += da_n.T @ (s["r"] * u[2])
            da_hn = da_n
        da_r = dr * _gate_grad_from_output(ra, s["r"])
        da_z = dz * _gate_grad_from_output(ra, s["z"])
        d_in = np.concatenate([da_r, da_z, da_n], axis=1)  # of W_i* v_* + b_i*, (B, 3H)
        d_rec = np.concatenate([da_r, da_z, da_hn], axis=1)  # of the recurrent terms
        db_ih += d_in.sum(axis=0)
        db_hh += d_rec.sum(axis=0)
        # gate g's rows of W_ih read v[g] = x_t * input_mask[g]: its gradient reaches x_t
        # through input_mask[g]
        dx[t] = _per_gate_backward(d_in, s["v"], s["input_mask"], w_ih, dw_ih, dx[t])
        # gate g's rows of W_hh read u[g]; its gradient reaches h through mask[g] (with
        # reset_after=False, n's rows read r * u_n: done above)
        gates = 3 if reset_after else 2
        dh_prev = _per_gate_backward(d_rec, u, mask, w_hh, dw_hh, dh_prev, gates)
        dh = np.where(k, dh_prev, dh)
    return GRUGrads(dx if input_gradient else None, dh, dw_ih, dw_hh, db_ih, db_hh)


def gru_step(
    x_t,
    h,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    *,
    reset_after=True,
    activation="tanh",
    recurrent_activation="sigmoid",
):
    """One GRU step: x_t (B, D), h (B, H) -> h_next (B, H)."""
    _check_names(activation, recurrent_activation)
    dtype = np.result_type(x_t, weight_ih)
    args = _cast(dtype, x_t, h, weight_ih, weight_hh, bias_ih, bias_hh)
    (h_next,), _ = _gru_cell(*args, reset_after, activation, recurrent_activation)
    return h_next


def lstm_forward(
    x,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    h0=None,
    c0=None,
    lengths=None,
    *,
    weight_hr=None,
    activation="tanh",
    recurrent_activation="sigmoid",
    return_sequences=True,
    keep_workspace=False,
    step_mask=None,
    zero_output_for_mask=False,
    recurrent_mask=None,
    input_mask=None,
):
    """LSTM forward over x (T, B, D); weight_ih (4H, D), weight_hh (4H, R), biases (4H,),
    weight_hr (P, H) (then R = P, else R = H), h0 (B, R), c0 (B, H), recurrent_mask (4, B, R),
    input_mask (4, B, D), in gate order i, f, g, o. Computes in ``np.result_type(x, weight_ih)``.

    Returns GatedOutput(y (T, B, R) or None without return_sequences, h_n (B, R), c_n (B, H),
    None): the reference keeps no workspace, whatever ``keep_workspace`` says."""
    options = {"activation": activation, "recurrent_activation": recurrent_activation}
    masks = (lengths, step_mask, zero_output_for_mask)
    y, h_n, c_n, _, _ = _lstm_run(
        x,
        weight_ih,
        weight_hh,
        bias_ih,
        bias_hh,
        h0,
        c0,
        masks,
        weight_hr,
        options,
        recurrent_mask,
        input_mask,
    )
    return GatedOutput(y if return_sequences else None, h_n, c_n, None)


def lstm_backward(
    x,
    weight_ih,
    weight_hh,
    bias_ih,
    bias_hh,
    y,
    workspace,
    dy=None,
    dh_n=None,
    dc_n=None,
    *,
    h0,
    c0,
    lengths,
    weight_hr,
    activation,
    recurrent_activation,
    step_mask,
    zero_output_for_mask,
    recurrent_mask,
    input_mask,
    input_gradient=True,
):
    """BPTT of :func:`lstm_forward` from the loss's gradients ``dy`` (T, B, R), ``dh_n``
    (B, R) and ``dc_n`` (B, H) (None: zeros; dy at padded steps is ignored). The forward is
    recomputed from the inputs: ``workspace`` is ignored, ``y`` only checked.

    Returns LSTMGrads(dx (T, B, D) or None without input_gradient, dh0 (B, R), dc0 (B, H),
    dweight_ih, dweight_hh, dbias_ih, dbias_hh, dweight_hr (None without weight_hr)); the two
    bias gradients are equal (both biases enter every gate the same way).

    Raises ValueError when ``y`` is None (a forward without return_sequences)."""
    if y is None:
        raise ValueError("y is None: the backward needs a forward run with return_sequences=True")
    options = {"activation": activation, "recurrent_activation": recurrent_activation}
    masks = (lengths, step_mask, zero_output_for_mask)
    y, _, _, caches, (w_ih, w_hh, w_hr) = _lstm_run(
        x,
        weight_ih,
        weight_hh,
        bias_ih,
        bias_hh,
        h0,
        c0,
        masks,
        weight_hr,
        options,
        recurrent_mask,
        input_mask,
    )
    T, B, R = y.shape
    H = w_hh.shape[0] // 4
    dtype = y.dtype
    kept, out = _gated_masks(masks, T, B)
    dy, dh_n, dc_n = _cast(dtype, dy, dh_n, dc_n)
    dx = np.zeros((T, B, x.shape[2]), dtype=dtype)
    dw_ih, dw_hh = np.zeros_like(w_ih), np.zeros_like(w_hh)
    dw_hr = None if w_hr is None else np.zeros_like(w_hr)
    db = np.zeros(4 * H, dtype=dtype)
    ra = recurrent_activation
    # dh, dc: gradients with respect to the states h_t, c_t, carried back through the steps
    dh = np.zeros((B, R), dtype=dtype) if dh_n is None else dh_n.copy()
    dc = np.zeros((B, H), dtype=dtype) if dc_n is None else dc_n.copy()
    for t in reversed(range(T)):
        k = kept[t]
        if dy is not None:
            dh = dh + np.where(out[t], dy[t], 0)
        s = caches[t]
        dh_new = np.where(k, dh, 0)  # a padded step's states are the ones before it
        dc_new = np.where(k, dc, 0)
        # h' = weight_hr m (or m),  m = o act(c')
        if w_hr is None:
            dm = dh_new
        else:
            dw_hr += dh_new.T @ s["m"]
            dm = dh_new @ w_hr
        do = dm * s["act_c"]
        dc_new = dc_new + dm * s["o"] * _act_grad_from_output(activation, s["act_c"])
        # c' = f c + i g
        di, df, dg = dc_new * s["g"], dc_new * s["c"], dc_new * s["i"]
        dc_prev = dc_new * s["f"]
        da = np.concatenate(
            [
                di * _gate_grad_from_output(ra, s["i"]),
                df * _gate_grad_from_output(ra, s["f"]),
                dg * _act_grad_from_output(activation, s["g"]),
                do * _gate_grad_from_output(ra, s["o"]),
            ],
            axis=1,
        )  # of the pre-activations, (B, 4H)
        db += da.sum(axis=0)
        # gate g's rows of W_ih read v[g] = x_t * input_mask[g] and its rows of W_hh read
        # u[g] = h * mask[g]: its gradient reaches x_t and h through those masks
        dx[t] = _per_gate_backward(da, s["v"], s["input_mask"], w_ih, dw_ih, dx[t])
        dh_prev = np.zeros((B, R), dtype=dtype)
        dh_prev = _per_gate_backward(da, s["u"], s["mask"], w_hh, dw_hh, dh_prev)
        dh = np.where(k, dh_prev, dh)
        dc = np.where(k, dc_prev, dc)
    return LSTMGrads(dx if input_gradient else None, dh, dc, dw_ih, dw_hh, db, db.copy(), dw_hr)


def lstm_step(
    x_t,
    h,
    c,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    *,
    weight_hr=None,
    activation="tanh",
    recurrent_activation="sigmoid",
):
    """One LSTM step: x_t (B, D), h (B, R), c (B, H) -> (h_next (B, R), c_next (B, H))."""
    _check_names(activation, recurrent_activation)
    dtype = np.result_type(x_t, weight_ih)
    args = _cast(dtype, x_t, h, c, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr)
    (h_next, c_next), _ = _lstm_cell(*args, activation, recurrent_activation)
    return h_next, c_next


# ---- the deep transition (Pascanu et al., ICLR 2014) ---------------------------------------------
#
#     z_1 = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh),  z_i = act(W_i z_{i-1} + b_i) (i = 2..k),
#     h_t = z_k
#
# weight_tr[i - 2] is W_i, bias_tr[i - 2] is b_i. Lengths as the Elman cell's: past its length a
# sequence outputs zeros and keeps its state.


def _deep_step(x_t, h, weight_ih, weight_hh, weight_tr, bias_ih, bias_hh, bias_tr, nonlinearity):
    """One step: the transition's layer outputs [z_1, ..., z_k] (B, H) each."""
    a = x_t @ weight_ih.T + h @ weight_hh.T
    if bias_ih is not None:
        a = a + bias_ih
    if bias_hh is not None:
        a = a + bias_hh
    zs = [_act(nonlinearity, a)]
    for i in range(len(weight_tr)):
        a = zs[-1] @ weight_tr[i].T
        if bias_tr is not None:
            a = a + bias_tr[i]
        zs.append(_act(nonlinearity, a))
    return zs


def _deep_run(x, weight_ih, weight_hh, weight_tr, bias_ih, bias_hh, bias_tr, h0, nonlinearity,
              lengths):  # fmt: skip
    """The forward: (y, h_n, the states before each step (T, B, H), each step's [z_1..z_k])."""
    T, B, _ = x.shape
    H = weight_hh.shape[0]
    dtype = np.result_type(x, weight_ih)
    h = np.zeros((B, H), dtype=dtype) if h0 is None else np.array(h0, dtype=dtype)
    in_length = _length_mask(lengths, T, B, dtype)
    y = np.empty((T, B, H), dtype=dtype)
    before, layers = np.empty((T, B, H), dtype=dtype), []
    for t in range(T):
        before[t] = h
        zs = _deep_step(
            x[t], h, weight_ih, weight_hh, weight_tr, bias_ih, bias_hh, bias_tr, nonlinearity
        )
        layers.append(zs)
        h = np.where(in_length[t] > 0, zs[-1], h)
        y[t] = zs[-1] * in_length[t]
    return y, h, before, layers


def deep_transition_forward(
    x,
    weight_ih,
    weight_hh,
    weight_tr,
    bias_ih=None,
    bias_hh=None,
    bias_tr=None,
    h0=None,
    nonlinearity="tanh",
    lengths=None,
):
    """Forward over x (T, B, D), weight_tr (k - 1, H, H). Returns (y (T, B, H), h_n (B, H))."""
    y, h_n, _, _ = _deep_run(
        x, weight_ih, weight_hh, np.asarray(weight_tr), bias_ih, bias_hh, bias_tr, h0,
        nonlinearity, lengths,
    )  # fmt: skip
    return y, h_n


def deep_transition_backward(
    x,
    weight_ih,
    weight_hh,
    weight_tr,
    dy=None,
    dh_n=None,
    *,
    bias_ih=None,
    bias_hh=None,
    bias_tr=None,
    h0,
    nonlinearity,
    lengths,
):
    """BPTT of :func:`deep_transition_forward`, recomputing its forward from the inputs.
    Returns (dx, dh0, dweight_ih, dweight_hh, dbias, dweight_tr, dbias_tr); dbias is the
    gradient of bias_ih and of bias_hh alike."""
    weight_tr = np.asarray(weight_tr)
    _, _, before, layers = _deep_run(
        x, weight_ih, weight_hh, weight_tr, bias_ih, bias_hh, bias_tr, h0, nonlinearity, lengths
    )
    T, B, _ = x.shape
    dtype = before.dtype
    in_length = _length_mask(lengths, T, B, dtype)
    dx = np.zeros(x.shape, dtype=dtype)
    dw_ih = np.zeros(weight_ih.shape, dtype=dtype)
    dw_hh = np.zeros(weight_hh.shape, dtype=dtype)
    db = np.zeros(weight_hh.shape[0], dtype=dtype)
    dw_tr = np.zeros(weight_tr.shape, dtype=dtype)
    db_tr = np.zeros(weight_tr.shape[:2], dtype=dtype)
    H = weight_hh.shape[0]
    g = np.zeros((B, H), dtype=dtype) if dh_n is None else np.array(dh_n, dtype=dtype)
    for t in reversed(range(T)):
        n = in_length[t]  # past a sequence's end: no output, the state passes through
        if dy is not None:
            g = g + n * dy[t]
        zs = layers[t]
        d = n * g  # the gradient of z_k = h_t where the step ran
        for i in range(len(zs) - 1, 0, -1):  # layers k .. 2
            delta = d * _act_grad_from_output(nonlinearity, zs[i])
            dw_tr[i - 1] += delta.T @ zs[i - 1]
            db_tr[i - 1] += delta.sum(axis=0)
            d = delta @ weight_tr[i - 1]
        delta = d * _act_grad_from_output(nonlinearity, zs[0])
        dw_ih += delta.T @ x[t]
        dw_hh += delta.T @ before[t]
        db += delta.sum(axis=0)
        dx[t] = delta @ weight_ih
        g = delta @ weight_hh + (1 - n) * g
    return dx, g, dw_ih, dw_hh, db, dw_tr, db_tr


def _layer_norm(v, weight, bias, eps=1e-5):
    """torch.nn.LayerNorm over the last axis: the biased variance, eps inside the root."""
    mean = v.mean(axis=-1, keepdims=True)
    var = ((v - mean) ** 2).mean(axis=-1, keepdims=True)
    return (v - mean) / np.sqrt(var + eps) * weight + bias


def layer_norm_lstm_forward(
    x,
    weight_ih,
    weight_hh,
    g_norm_weight,
    g_norm_bias,
    c_norm_weight,
    c_norm_bias,
    h0=None,
    c0=None,
    lengths=None,
    *,
    bias_ih=None,
    bias_hh=None,
    activation="tanh",
    recurrent_activation="sigmoid",
):
    """The LayerNorm LSTM (torchaudio's ``_CustomLSTM`` with ``layer_norm=True``) over x (T,
    B, D), straight from its equations (``rnnfast.functional.layer_norm_lstm``); past a
    sequence's length the output is zeros and the states stay. Computes in
    ``np.result_type(x, weight_ih)``. Returns GatedOutput(y (T, B, H), h_n, c_n, None); the
    gradients are checked against this by finite differences (no hand-written backward)."""
    dt = np.result_type(x, weight_ih)
    x, w_ih, w_hh, gw, gb, cw, cb, h, c, b_ih, b_hh = _cast(
        dt, x, weight_ih, weight_hh, g_norm_weight, g_norm_bias, c_norm_weight, c_norm_bias, h0,
        c0, bias_ih, bias_hh,
    )  # fmt: skip
    T, B, _ = x.shape
    H = w_hh.shape[1]
    h = np.zeros((B, H), dt) if h is None else h.copy()
    c = np.zeros((B, H), dt) if c is None else c.copy()
    running = np.ones((T, B, 1), dt) if lengths is None else _length_mask(lengths, T, B, dt)
    y = np.zeros((T, B, H), dt)
    for t in range(T):
        z = _linear(x[t], w_ih, b_ih) + _linear(h, w_hh, b_hh)
        i, f, g, o = np.split(_layer_norm(z, gw, gb), 4, axis=-1)
        i, f, o = (_gate(recurrent_activation, v) for v in (i, f, o))
        c_new = _layer_norm(f * c + i * _act(activation, g), cw, cb)
        h_new = o * _act(activation, c_new)
        keep = running[t]
        h = keep * h_new + (1 - keep) * h
        c = keep * c_new + (1 - keep) * c
        y[t] = keep * h_new
    return GatedOutput(y, h, c, None)


def lstm_form_forward(
    x,
    weight_ih,
    weight_hh,
    bias_ih=None,
    bias_hh=None,
    h0=None,
    c0=None,
    lengths=None,
    *,
    peepholes=None,
    input_forget=False,
    cell_clip=None,
    activation="tanh",
    recurrent_activation="sigmoid",
):
    """ONNX's forms of the LSTM (``rnnfast.functional.lstm_forms``) over x (T, B, D), straight
    from the equations as onnxruntime's CPU LSTM computes them (gate order i, f, g, o)::

        a_i += p_i c_{t-1},  a_f += p_f c_{t-1}           peepholes (3H,) = [p_i | p_f | p_o]
        i = ra(clip(a_i)),  f = ra(clip(a_f)),  g = act(clip(a_g))
        f = 1 - i                                         input_forget
        c_t = f c_{t-1} + i g
        o = ra(clip(a_o + p_o c_t)),  h_t = o act(c_t)    (act's input c_t is not clipped)

    clip(v) = min(max(v, -cell_clip), cell_clip) (None: no clip). Past a sequence's length the
    output is zeros and the states stay. Computes in ``np.result_type(x, weight_ih)``. Returns
    GatedOutput(y (T, B, H), h_n, c_n, None); the gradients are checked against this by finite
    differences (no hand-written backward)."""
    _check_names(activation, recurrent_activation)
    dt = np.result_type(x, weight_ih)
    x, w_ih, w_hh, b_ih, b_hh, h, c, p = _cast(
        dt, x, weight_ih, weight_hh, bias_ih, bias_hh, h0, c0, peepholes
    )
    T, B, _ = x.shape
    H = w_hh.shape[1]
    h = np.zeros((B, H), dt) if h is None else h.copy()
    c = np.zeros((B, H), dt) if c is None else c.copy()
    p_i, p_f, p_o = np.split(np.zeros(3 * H, dt) if p is None else p, 3)
    clip = (lambda v: v) if cell_clip is None else (lambda v: np.clip(v, -cell_clip, cell_clip))
    running = np.ones((T, B, 1), dt) if lengths is None else _length_mask(lengths, T, B, dt)
    y = np.zeros((T, B, H), dt)
    for t in range(T):
        a_i, a_f, a_g, a_o = np.split(_linear(x[t], w_ih, b_ih) + _linear(h, w_hh, b_hh), 4, -1)
        i = _gate(recurrent_activation, clip(a_i + p_i * c))
        f = 1 - i if input_forget else _gate(recurrent_activation, clip(a_f + p_f * c))
        c_new = f * c + i * _act(activation, clip(a_g))
        o = _gate(recurrent_activation, clip(a_o + p_o * c_new))
        h_new = o * _act(activation, c_new)
        keep = running[t]
        h = keep * h_new + (1 - keep) * h
        c = keep * c_new + (1 - keep) * c
        y[t] = keep * h_new
    return GatedOutput(y, h, c, None)
