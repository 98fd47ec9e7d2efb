"""The model of bf16 products on the NumPy reference (``rnnfast.reference``), and the bound
the kernels must meet against it.

The model of one step of a cell is the reference's own equations in float64 with both operands
of every product rounded to bf16 by the kernels' rounding (``_core.round_to_bf16``, to nearest
even): a product of two bf16 numbers is exact in float64, and so, to 2**-53, is their sum.
The reference multiplies only through its weights, so the weights are wrapped in ``Rounded``,
whose matmul goes through ``Recorder.product``; ``reference_model()`` makes the reference keep
them wrapped (its ``_cast`` takes subclasses as they are) and records its layer norms.

Each step starts from the kernels' own state (teacher forcing), so the kernels and the model
round the same float32 operands and nothing accumulates over time. What may still differ at a
step's outputs, bounded by ``Recorder.bound``:

    |kernels - model| <= C * gain * E + TOL32(y)

E
    The largest, over the step's products and output elements, of (a) the error of the
    kernels' float32 sums, K * 2**-24 * sum_k |a_k b_k| for a sum of K exact products (Higham's
    gamma_K, first order), and (b) the roundings the model cannot decide: an operand the model
    computed itself within the step (a GRU's r * h, an LSTM's o * tanh(c) before its
    projection, a transition layer's output), whose float32 value in the kernels lies within
    TOL32 of it (the float32 kernels' tolerance against this reference, ``conftest.TOL``), may
    round to any bf16 value of that interval: its spread, times |the other operand|.
gain
    How much a product's error can grow before the step's outputs: the infinity norm of each
    weight that reads an operand computed within the step (max(1, ||W||_inf)), and each layer
    norm's 2 max|weight| / min sigma (a shift of the mean and a rescale by 1 / sigma).
C = 4
    The element-wise steps' Lipschitz bound from pre-activations to outputs: tanh and relu 1,
    sigmoid 1/4; a GRU's (1 - z) n + z h and an LSTM's o tanh(f c + i g) at most 2.5 + |h_n|/4
    and 1.5 + |c|/4 (c the state the step starts from), at most 4 while |h_n| <= 6 and
    |c| <= 10. The tests assert the second; the first holds for PyTorch's initialisation,
    |h_n| <= ||W_hh||_inf |h| + |b_hh| <= sqrt(H) + 1 / sqrt(H) with |h| <= 1 (3.0 at H = 7).
TOL32(y)
    The float32 element-wise arithmetic of the kernels (their gate functions), the tolerance
    the float32 parity tests give it: 5e-5 |y| + 5e-6 max(1, max |y|).
"""

from __future__ import annotations

import contextlib

import numpy as np

import rnnfast
from rnnfast import _core, reference

# the float32 kernels against the float64 reference (tests/conftest.py's TOL[np.float32])
RTOL32, ATOL32 = 5e-5, 5e-6
FLOAT32_EPS = 2.0**-24  # float32's unit roundoff: the sums' rounding per addition
ELEMENTWISE_GAIN = 4.0  # C above


def round_bf16(v):
    """``v`` (float64) as the kernels round a float32 operand: to float32, then to bf16."""
    return _core.round_to_bf16(np.asarray(v, np.float64).astype(np.float32)).astype(np.float64)


def tol32(y):
    """The float32 kernels' tolerance at ``y`` (elementwise)."""
    return RTOL32 * np.abs(y) + ATOL32 * max(1.0, float(np.max(np.abs(y), initial=0.0)))


class Recorder:
    """The products of one step of the model: computed from bf16-rounded operands, and what
    they add to the step's bound (see the module's docstring)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.error = 0.0  # E
        self.gain = 1.0

    def product(self, a, b):
        """``a @ b`` with both operands rounded to bf16, computed in float64."""
        ra, rb = round_bf16(a), round_bf16(b)
        terms = np.abs(ra) @ np.abs(rb)
        error = a.shape[-1] * FLOAT32_EPS * terms
        spread_a, spread_b = self._spread(a), self._spread(b)
        if spread_a is not None:  # an operand computed within the step, read by weight b
            error = error + spread_a @ np.abs(rb)
            self.gain *= max(1.0, float(np.max(np.abs(rb).sum(axis=0))))
        if spread_b is not None:
            error = error + np.abs(ra) @ spread_b
            self.gain *= max(1.0, float(np.max(np.abs(ra).sum(axis=-1))))
        self.error = max(self.error, float(np.max(error, initial=0.0)))
        return ra @ rb

    @staticmethod
    def _spread(v):
        """For an operand the model computed (not a float32 number: the kernels' float32 value
        is within TOL32 of it), how far apart the bf16 roundings of that interval lie; None
        for float32 numbers (inputs, teacher-forced states, weights), which round as the
        kernels round them."""
        v = np.asarray(v, np.float64)
        exact = v == v.astype(np.float32).astype(np.float64)
        if exact.all():
            return None
        delta = np.where(exact, 0.0, tol32(v))
        return np.abs(round_bf16(v + delta) - round_bf16(v - delta))

    def layer_norm(self, v, weight, eps):
        """Record a layer norm's amplification of the errors of ``v``."""
        sigma = np.sqrt(np.min(np.var(v, axis=-1)) + eps)
        self.gain *= max(1.0, 2.0 * float(np.max(np.abs(weight))) / sigma)

    def bound(self, y):
        """The largest |kernels - model| allowed at the step's output ``y`` (elementwise)."""
        return ELEMENTWISE_GAIN * self.gain * self.error + tol32(y)


_RECORDER = Recorder()


class Rounded(np.ndarray):
    """A weight of the model: every matmul it enters is ``Recorder.product`` (both operands
    rounded to bf16); any other operation sees a plain array."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [i.view(np.ndarray) if isinstance(i, Rounded) else i for i in inputs]
        if ufunc is np.matmul and method == "__call__" and not kwargs:
            return _RECORDER.product(*plain)
        return getattr(ufunc, method)(*plain, **kwargs)


def _cast_keeping_weights(dtype, *arrays):
    """reference._cast, keeping ``Rounded`` weights wrapped."""
    return [None if a is None else np.asanyarray(a, dtype=dtype) for a in arrays]


@contextlib.contextmanager
def reference_model(monkeypatch):
    """The reference as the model of bf16 products while the block runs: yields the
    recorder of its products."""
    plain_layer_norm = reference._layer_norm

    def recorded_layer_norm(v, weight, bias, eps=1e-5):
        _RECORDER.layer_norm(v, weight, eps)
        return plain_layer_norm(v, weight, bias, eps)

    monkeypatch.setattr(reference, "_cast", _cast_keeping_weights)
    monkeypatch.setattr(reference, "_layer_norm", recorded_layer_norm)
    _RECORDER.reset()
    yield _RECORDER


def model_parameters(layer):
    """The one-layer, one-direction ``layer``'s parameters in float64 without their ``_l0``
    suffix: weights wrapped in ``Rounded``, biases and norms plain (the kernels add them in
    float32, never multiply by them)."""
    out = {}
    for name, p in layer.state_dict().items():
        value = np.asarray(p, np.float64)
        short = name.removesuffix("_l0")
        out[short] = value.view(Rounded) if short.startswith("weight") else value
    return out


def model_step(layer, p, x_t, state):
    """One step of ``layer``'s cell in the model from the kernels' state: ``(y_t, state)``,
    the state h (B, H), or the LSTMs' (h, c)."""
    x = np.asarray(x_t, np.float64)[None]
    if isinstance(layer, rnnfast.DeepTransitionRNN):
        k = layer.transition_layers
        w_tr = [p[f"weight_tr{i}"] for i in range(2, k + 1)]
        b_tr = np.stack([p[f"bias_tr{i}"] for i in range(2, k + 1)]) if layer.bias else None
        y, h, _, _ = reference._deep_run(
            x, p["weight_ih"], p["weight_hh"], w_tr, p.get("bias_ih"), p.get("bias_hh"), b_tr,
            state, layer.nonlinearity, None,
        )  # fmt: skip
        return y[0], h
    if isinstance(layer, rnnfast.LayerNormLSTM):
        out = reference.layer_norm_lstm_forward(
            x, p["weight_ih"], p["weight_hh"], p["g_norm_weight"], p["g_norm_bias"],
            p["c_norm_weight"], p["c_norm_bias"], *state, bias_ih=p.get("bias_ih"),
            bias_hh=p.get("bias_hh"),
        )  # fmt: skip
        return out.y[0], (out.h_n, out.c_n)
    if isinstance(layer, rnnfast.LSTM):
        out = reference.lstm_forward(
            x, p["weight_ih"], p["weight_hh"], p.get("bias_ih"), p.get("bias_hh"), *state,
            weight_hr=p.get("weight_hr"),
        )  # fmt: skip
        return out.y[0], (out.h_n, out.c_n)
    if isinstance(layer, rnnfast.GRU):
        out = reference.gru_forward(
            x, p["weight_ih"], p["weight_hh"], p.get("bias_ih"), p.get("bias_hh"), state,
            reset_after=layer.reset_after,
        )  # fmt: skip
        return out.y[0], out.h_n
    y, h = reference.rnn_forward(
        x, p["weight_ih"], p["weight_hh"], p.get("bias_ih"), p.get("bias_hh"), state,
        layer.nonlinearity,
    )  # fmt: skip
    return y[0], h
