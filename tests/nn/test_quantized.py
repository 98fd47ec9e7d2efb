"""The quantized layers (nn.quantized.layers, nn.quantized.rnn) against the NumPy model of the contract
(tests/quantized_model.py), on every quantized path this machine has: int8 bit for bit where no
tanh is involved (relu layers; a tanh may differ from NumPy's in its last bit, and so move an
int8 rounding of the next step's state), bf16 within its float32 accumulation order.

The models compose the NumPy model's one-direction forward here, independently of the stack
runner: layers, directions (each sequence reversed within its length), lengths and h0."""

from __future__ import annotations

import numpy as np
import pytest
import quantized_model as qm

import rnnfast
from rnnfast import _core

PATHS = _core.quantized_paths()

# What may differ from the NumPy model, and by how much:
# - bf16: the model sums in float64, the kernels in float32 in their order: a few float32
#   roundings of each product (BF16_TOL, what the first step shows);
# - int8 with tanh: np.tanh and the kernels' tanh may differ in the last bit (INT8_TANH_TOL);
# - from the second step on, a state value one float32 ulp away from the model's can round to
#   the neighbouring bf16 value or int8 step of the next product's input: a change of about
#   2^-8 (bf16) or 1/127 (int8) of one input value times weights ~ 1/sqrt(H) (FLIP_ATOL).
BF16_TOL = {"rtol": 2e-5, "atol": 2e-6}
INT8_TANH_TOL = {"rtol": 1e-6, "atol": 1e-7}
FLIP_ATOL = 5e-3


@pytest.fixture(params=PATHS)
def path(request):
    _core.set_quantized_path(request.param)
    yield request.param
    _core.set_quantized_path("")


def _direction(q, idx, x, h0, lengths, nonlinearity, alpha):
    """One (layer, direction) of QuantizedRNN ``q`` by the NumPy model, from its raw arrays."""
    n_ih, n_hh, _, _ = q._names[idx]
    w_ih, w_hh = q._weights[n_ih], q._weights[n_hh]
    bias = q._floats.get(n_ih.replace("weight_ih", "bias"))
    if w_ih.kind == "int8":
        return qm.rnn_forward_int8(
            x, h0, w_ih.data, w_ih.scale, w_hh.data, w_hh.scale, bias, lengths, nonlinearity, alpha
        )
    return qm.rnn_forward_bf16(x, h0, w_ih.data, w_hh.data, bias, lengths, nonlinearity, alpha)


def _reverse(x, lengths):
    """Each sequence of (T, B, ...) reversed within its own length (padding stays at the end)."""
    steps = x.shape[0]
    lengths = np.full(x.shape[1], steps) if lengths is None else lengths
    out = np.zeros_like(x)
    for b, n in enumerate(lengths):
        out[:n, b] = x[:n][::-1, b]
    return out


def _model_forward(q, x, h0, lengths):
    """(y, h_n) of a (stacked, bidirectional) QuantizedRNN by the NumPy model."""
    dirs = 2 if q.bidirectional else 1
    inp, states = x, []
    for k in range(q.num_layers):
        outs = []
        for d in range(dirs):
            idx = k * dirs + d
            h0_d = None if h0 is None else h0[idx]
            xin = _reverse(inp, lengths) if d else inp
            y, h_n = _direction(q, idx, xin, h0_d, lengths, q.nonlinearity, q.alpha)
            outs.append(_reverse(y, lengths) if d else y)
            states.append(h_n)
        inp = np.concatenate(outs, axis=2)
    return inp, np.stack(states)


def _compare(mode, nonlinearity, got, want, first_step):
    """``got`` (the kernels') against ``want`` (the model's); ``first_step``: the values
    computed from the given inputs alone, before any state has been rounded."""
    exact = mode == "int8" and nonlinearity == "relu"
    if exact:
        np.testing.assert_array_equal(got, want)
        return
    tight = BF16_TOL if mode == "bf16" else INT8_TANH_TOL
    np.testing.assert_allclose(got[first_step], want[first_step], **tight)
    np.testing.assert_allclose(got, want, rtol=0, atol=FLIP_ATOL)


@pytest.mark.parametrize("mode", ["bf16", "int8"])
@pytest.mark.parametrize("nonlinearity", ["relu", "tanh"])
@pytest.mark.parametrize(
    "num_layers,bidirectional,alpha", [(1, False, 1.0), (2, True, 1.0), (3, False, 0.6)]
)
@pytest.mark.parametrize("sizes", [(1, 1, 1, 1), (7, 3, 17, 33), (5, 4, 100, 3)])
def test_rnn_matches_the_numpy_model(
    mode, nonlinearity, num_layers, bidirectional, alpha, sizes, path, rng
):
    T, B, D, H = sizes
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=num_layers,
        bidirectional=bidirectional,
        nonlinearity=nonlinearity,
        alpha=alpha,
        seed=0,
    )
    q = rnnfast.quantize(layer, mode)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    rows = num_layers * (2 if bidirectional else 1)
    # |h0| up to 2: tanh rows outside [-1, 1] take the dynamic scale
    h0 = (2 * rng.standard_normal((rows, B, H))).astype(np.float32)
    lengths = rng.integers(0, T + 1, size=B)
    for args in ((None, None), (h0, lengths)):
        y, h_n = q(x, *args)
        y_ref, h_ref = _model_forward(q, x, *args)
        # one layer: its forward direction at step 0 reads x and h0 only (a stacked layer's
        # input is its lower layer's output, rounded again)
        first = (0, slice(None), slice(0, H)) if num_layers == 1 else (slice(0, 0),)
        _compare(mode, nonlinearity, y, y_ref, first)
        _compare(mode, nonlinearity, h_n, h_ref, (slice(0, 0),))


@pytest.mark.parametrize("mode", ["bf16", "int8"])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_the_numpy_model(mode, bias, path, rng):
    layer = rnnfast.Linear(33, 17, bias=bias, seed=0)
    q = rnnfast.quantize(layer, mode)
    x = rng.standard_normal((2, 5, 33)).astype(np.float32)
    w = q._weights["weight"]
    b = q._floats.get("bias")
    rows = x.reshape(-1, 33)
    if mode == "int8":
        want = qm.dense_int8(rows, w.data, w.scale, b)
        np.testing.assert_array_equal(q(x).reshape(-1, 17), want)
    else:
        want = qm.dense_bf16(rows, w.data, b)
        bound = qm.bf16_sum_bound(rows, w.data) + 1e-7 * np.abs(want)  # + the bias's rounding
        assert np.all(np.abs(q(x).reshape(-1, 17) - want) <= bound)
    # the biases stay float32 and the weights are the contract's
    if bias:
        np.testing.assert_array_equal(b, layer._params["bias"])
    if mode == "int8":
        q_ref, s_ref = qm.quantize_weights_int8(layer._params["weight"])
        np.testing.assert_array_equal(w.data, q_ref)
        np.testing.assert_array_equal(w.scale, s_ref)
    else:
        np.testing.assert_array_equal(w.data, qm.to_bf16_bits(layer._params["weight"]))


def test_rnn_bias_is_the_float32_sum_of_the_two():
    layer = rnnfast.RNN(3, 5, num_layers=2, bidirectional=True, seed=0)
    q = rnnfast.quantize(layer, "int8")
    p = layer.state_dict()
    for sfx in ("_l0", "_l1_reverse"):
        np.testing.assert_array_equal(
            q._floats["bias" + sfx], p["bias_ih" + sfx] + p["bias_hh" + sfx]
        )
    assert "bias_ih_l0" not in q.state_dict()


@pytest.mark.parametrize("mode", ["bf16", "int8"])
def test_embedding_rows_are_the_numpy_models(mode, rng):
    emb = rnnfast.Embedding(11, 6, padding_idx=0, seed=0)
    q = rnnfast.quantize(emb, mode)
    table = emb.weight
    if mode == "int8":
        qt, st = qm.quantize_weights_int8(table)
        expected = qt.astype(np.float32) * st[:, None]
    else:
        expected = qm.bf16_to_f32(qm.to_bf16_bits(table))
    ids = rng.integers(0, 11, size=(4, 5))
    np.testing.assert_array_equal(q(ids), expected[ids])
    np.testing.assert_array_equal(q.weight, expected)
    assert not q(np.zeros(3, np.int64)).any()  # the padding row stays zeros
    assert q.valid_positions(ids) is not None  # padding travels as the float layer's
