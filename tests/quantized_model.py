"""A NumPy model of the quantized formats of issue 16 (the contract the kernels implement).

Every float operation is float32 and in the contract's order, so the int8 results of the kernels
match it bit for bit wherever no tanh is involved (the kernels' vector tanh may differ from
np.tanh in the last bits). bf16 sums are formed here in float64: the kernels' float32 sums differ
from them only by their accumulation order, bounded by ``bf16_sum_bound``.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32
FIXED_SCALE = F32(1) / F32(127)  # the recurrent input scale of a tanh layer


def quantize_rows_int8(x):
    """Dynamic symmetric per-row int8: (q int8 (M, K), scale float32 (M,)).

    amax = max |x|, scale = amax / 127, q = clip(rint(x * (127 / amax)), -127, 127); a zero row
    has scale 0 and q 0; a row with a non-finite value has scale NaN and q 0.
    """
    x = np.asarray(x, dtype=F32)
    amax = np.max(np.abs(x), axis=1) if x.shape[1] else np.zeros(x.shape[0], F32)
    finite = np.isfinite(x).all(axis=1)
    with np.errstate(all="ignore"):
        mult = F32(127) / amax
        r = np.rint(x * mult[:, None])
        r = np.where(np.isnan(r), F32(0), r)  # 0 * inf where 127 / amax overflowed
        q = np.clip(r, -127, 127).astype(np.int8)
        scale = (amax / F32(127)).astype(F32)
    bad = ~finite | (amax == 0)
    q[bad] = 0
    scale[amax == 0] = 0
    scale[~finite] = np.nan
    return q, scale


def quantize_weights_int8(w):
    """Per-output-row int8 weights of a float matrix W (N, K): the same formula as the rows."""
    return quantize_rows_int8(w)


def quantize_state_int8(h, nonlinearity):
    """The recurrent input h_{t-1}: a tanh layer's rows within [-1, 1] take the fixed scale."""
    q, s = quantize_rows_int8(h)
    if nonlinearity == "tanh":
        h = np.asarray(h, dtype=F32)
        inside = np.isfinite(h).all(axis=1) & (np.abs(h) <= 1).all(axis=1)
        fixed = np.clip(np.rint(h * F32(127)), -127, 127).astype(np.int8)
        q[inside] = fixed[inside]
        s[inside] = FIXED_SCALE
    return q, s


def to_bf16_bits(x):
    """float32 -> bfloat16 bits (uint16), round to nearest even; NaN stays (quiet) NaN."""
    bits = np.ascontiguousarray(x, dtype=F32).view(np.uint32).astype(np.uint64)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    quiet = (bits >> 16) | 0x40
    return np.where(nan, quiet, rounded).astype(np.uint16)


def bf16_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint32) << 16).view(F32)


def int8_matmul(qa, qw):
    """acc = qa . qw^T, exact, int32."""
    return (np.asarray(qa, np.int64) @ np.asarray(qw, np.int64).T).astype(np.int32)


def dequantize(acc, s_a, s_w):
    """float(acc) * (s_a * s_w): the scale product first, all float32."""
    return acc.astype(F32) * (np.asarray(s_a, F32)[:, None] * np.asarray(s_w, F32)[None, :])


def dense_int8(x, qw, sw, bias=None):
    qa, sa = quantize_rows_int8(x)
    out = dequantize(int8_matmul(qa, qw), sa, sw)
    return out if bias is None else out + np.asarray(bias, F32)


def bf16_product(x, wbits):
    """bf16(x) . bf16(W)^T summed in float64 (the kernels sum in float32)."""
    a = bf16_to_f32(to_bf16_bits(x)).astype(np.float64)
    return a @ bf16_to_f32(wbits).astype(np.float64).T


def bf16_sum_bound(x, wbits):
    """A bound on |float32 sum - exact sum| for any order: K * 2^-23 * sum |a_k w_k| (+ tiny)."""
    a = np.abs(bf16_to_f32(to_bf16_bits(x)).astype(np.float64))
    w = np.abs(bf16_to_f32(wbits).astype(np.float64))
    K = max(1, a.shape[1])
    return K * 2.0**-23 * (a @ w.T) + 1e-30


def dense_bf16(x, wbits, bias=None):
    out = bf16_product(x, wbits).astype(F32)
    return out if bias is None else out + np.asarray(bias, F32)


def _activate(pre, nonlinearity):
    return np.tanh(pre) if nonlinearity == "tanh" else np.maximum(pre, F32(0))


def _forward(step_product, x, h0, bias, lengths, nonlinearity, alpha):
    """The recurrence around `step_product(x_t, h) -> (proj without bias, recurrent term)`."""
    x = np.asarray(x, F32)
    T, B, _ = x.shape
    H = step_product.hidden
    h = np.zeros((B, H), F32) if h0 is None else np.array(h0, F32)
    lengths = np.full(B, T) if lengths is None else np.asarray(lengths)
    y = np.zeros((T, B, H), F32)
    h_n = h.copy()
    keep, a32 = F32(1) - F32(alpha), F32(alpha)
    for t in range(T):
        proj, rec = step_product(x[t], h)
        if bias is not None:
            proj = proj + np.asarray(bias, F32)
        act = _activate(proj + rec, nonlinearity)
        if alpha != 1:
            act = keep * h + a32 * act
        running = lengths > t
        h = np.where(running[:, None], act, h)
        y[t, running] = act[running]
        ends = lengths == t + 1
        h_n[ends] = act[ends]
    return y, h_n


class _Int8Step:
    def __init__(self, q_ih, s_ih, q_hh, s_hh, nonlinearity):
        self.q_ih, self.s_ih, self.q_hh, self.s_hh = q_ih, s_ih, q_hh, s_hh
        self.nonlinearity = nonlinearity
        self.hidden = q_hh.shape[0]

    def __call__(self, x_t, h):
        proj = dense_int8(x_t, self.q_ih, self.s_ih)
        qh, sh = quantize_state_int8(h, self.nonlinearity)
        return proj, dequantize(int8_matmul(qh, self.q_hh), sh, self.s_hh)


class _Bf16Step:
    def __init__(self, b_ih, b_hh):
        self.b_ih, self.b_hh = b_ih, b_hh
        self.hidden = b_hh.shape[0]

    def __call__(self, x_t, h):
        return dense_bf16(x_t, self.b_ih), dense_bf16(h, self.b_hh)


def rnn_forward_int8(
    x, h0, q_ih, s_ih, q_hh, s_hh, bias=None, lengths=None, nonlinearity="tanh", alpha=1.0
):
    """(y (T, B, H) with padded steps zero, h_n (B, H)) of one int8 layer."""
    step = _Int8Step(q_ih, s_ih, q_hh, s_hh, nonlinearity)
    return _forward(step, x, h0, bias, lengths, nonlinearity, alpha)


def rnn_forward_bf16(x, h0, b_ih, b_hh, bias=None, lengths=None, nonlinearity="tanh", alpha=1.0):
    """(y, h_n) of one bf16 layer (weights as bf16 bits); sums in float64, see bf16_sum_bound."""
    return _forward(_Bf16Step(b_ih, b_hh), x, h0, bias, lengths, nonlinearity, alpha)


# ---- the gated cells (GRU, LSTM): quantized products, float32 gates ------------------------------


def _sigmoid(a):
    return (F32(1) / (F32(1) + np.exp(-a))).astype(F32)


class GatedProducts:
    """The products of a quantized gated layer, as the kernels form them: ``(x_t, W) -> Q(x_t)
    W^T`` dequantized, with the recurrent input of a tanh cell on the fixed int8 scale where
    its rows allow (``fixed_scale``)."""

    def __init__(self, mode):
        self.mode = mode

    def __call__(self, a, w, fixed_scale=False):
        w = np.asarray(w, F32)
        if self.mode == "bf16":
            return bf16_product(a, to_bf16_bits(w)).astype(F32)
        qw, sw = quantize_weights_int8(w)
        qa, sa = quantize_state_int8(a, "tanh" if fixed_scale else "relu")
        return dequantize(int8_matmul(qa, qw), sa, sw)


def gated_forward_quantized(cell, mode, x, w_ih, w_hh, b_ih, b_hh, w_hr=None, lengths=None):
    """(y (T, B, R) with padded steps zero, h_n, c_n or None) of one quantized GRU
    (``cell`` "gru" or "gru_reset_before") or LSTM layer from zero states: the products of
    :class:`GatedProducts`, the biases and gates in float32 in the kernels' order of additions
    (the projection with its summed bias, then the recurrent term with b_hn inside the GRU's
    reset)."""
    prod = GatedProducts(mode)
    x = np.asarray(x, F32)
    T, B, _ = x.shape
    G = 4 if cell == "lstm" else 3
    H = w_ih.shape[0] // G
    R = H if w_hr is None else w_hr.shape[0]
    b_ih = np.zeros(G * H, F32) if b_ih is None else np.asarray(b_ih, F32)
    b_hh = np.zeros(G * H, F32) if b_hh is None else np.asarray(b_hh, F32)
    inside = cell == "gru"  # b_hn stays inside r * (W_hn h + b_hn)
    bias_x = b_ih + np.where(np.arange(G * H) >= 2 * H, F32(0), b_hh) if inside else b_ih + b_hh
    h, c = np.zeros((B, R), F32), np.zeros((B, H), F32)
    lengths = np.full(B, T) if lengths is None else np.asarray(lengths)
    y = np.zeros((T, B, R), F32)
    h_n, c_n = h.copy(), c.copy()
    tanh_state = w_hr is None
    for t in range(T):
        a = prod(x[t], w_ih) + bias_x
        if cell == "lstm":
            a = a + prod(h, w_hh, tanh_state)
            i, f = _sigmoid(a[:, :H]), _sigmoid(a[:, H : 2 * H])
            g, o = np.tanh(a[:, 2 * H : 3 * H]), _sigmoid(a[:, 3 * H :])
            c_new = f * c + i * g
            m = o * np.tanh(c_new)
            h_new = m if w_hr is None else prod(m, w_hr)
        else:
            rz = a[:, : 2 * H] + prod(h, w_hh[: 2 * H], True)
            r, z = _sigmoid(rz[:, :H]), _sigmoid(rz[:, H:])
            if cell == "gru":
                n = np.tanh(a[:, 2 * H :] + r * (prod(h, w_hh[2 * H :], True) + b_hh[2 * H :]))
            else:
                n = np.tanh(a[:, 2 * H :] + prod(r * h, w_hh[2 * H :]))
            h_new, c_new = (F32(1) - z) * n + z * h, c
        running = lengths > t
        h = np.where(running[:, None], h_new, h)
        c = np.where(running[:, None], c_new, c)
        y[t, running] = h_new[running]
        ends = lengths == t + 1
        h_n[ends], c_n[ends] = h_new[ends], c_new[ends]
    return y, h_n, (c_n if cell == "lstm" else None)
