"""Keras 3 (torch backend) as an oracle for Keras's semantics: SimpleRNN and Bidirectional with
random weights loaded through rnnfast.interop.load_keras give the same outputs, masks included.

Keras's semantics that matter here:
- a masked step keeps the state; a plain SimpleRNN's output there repeats the previous output
  (zeros before the first valid step) unless ``zero_output_for_mask=True``, which gives zeros,
  rnnfast's convention (Bidirectional forces it when returning sequences); the last output
  (return_sequences=False) is each sequence's last valid output only without it: with
  ``zero_output_for_mask=True`` a padded sequence's last output is zeros;
- ``go_backwards`` reverses the sequence and the mask, and returns the outputs in that
  processing order: with a right-padded mask the padded steps come first (zeros), then the
  valid steps from the last to the first;
- Bidirectional flips its backward layer's output sequence back to the original time order.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ACTIVATIONS, assert_close

import rnnfast
from rnnfast import interop, persistence

T, B, D, H = 7, 4, 5, 6
LENGTHS = np.array([7, 3, 1, 0])  # full, partial, one step, empty
MERGE_MODES = ["concat", "sum", "mul", "ave"]
# Keras 3.15's torch backend computes ops.matmul of two float64 tensors in float32
# (keras.backend.result_type("float64", "float64") == "float32"): a float64 SimpleRNN is only
# float32-accurate there, so Keras is an oracle in float32 only.


def _np(out):
    """A Keras (torch backend) output, or a list of them, as NumPy."""
    if isinstance(out, (list, tuple)):
        return [_np(o) for o in out]
    return out.detach().cpu().numpy()


def _rnnfast(**kw):
    return rnnfast.RNN(**kw)


def _loaded(kl, **options):
    """An rnnfast layer (batch first, the module's D and H, ``options``) holding the weights of
    the Keras layer ``kl``."""
    layer = _rnnfast(input_size=D, hidden_size=H, batch_first=True, **options)
    interop.load_keras(layer, kl)
    return layer


def _call(layer, x, **kw):
    return layer(x, **kw)


def _random_weights(layer, rng, dtype):
    """Random weights for every variable of a built Keras layer (small: relu stays tame)."""
    weights = [rng.uniform(-0.6, 0.6, size=tuple(v.shape)).astype(dtype) for v in layer.weights]
    layer.set_weights(weights)
    return weights


def _simple_rnn(keras, rng, dtype, *, activation="tanh", use_bias=True, input_dim=D, **kw):
    kl = keras.layers.SimpleRNN(
        H, activation=activation, use_bias=use_bias, dtype=np.dtype(dtype).name, **kw
    )
    kl.build((None, T, input_dim))
    _random_weights(kl, rng, dtype)
    return kl


def _bidirectional(keras, rng, dtype, merge_mode, *, activation="tanh", input_dim=D, **kw):
    kl = keras.layers.Bidirectional(
        keras.layers.SimpleRNN(H, activation=activation, dtype=np.dtype(dtype).name, **kw),
        merge_mode=merge_mode,
        dtype=np.dtype(dtype).name,
    )
    kl.build((None, T, input_dim))
    _random_weights(kl, rng, dtype)
    return kl


def _x(rng, dtype, lengths=None):
    """(B, T, D) input; zeros past each length (so keras.layers.Masking finds the same mask)."""
    x = rng.standard_normal((B, T, D)).astype(dtype)
    if lengths is not None:
        x[np.arange(T)[None, :] >= lengths[:, None]] = 0.0
    return x


def _mask(lengths):
    return np.arange(T)[None, :] < lengths[:, None]


# ---- SimpleRNN ----------------------------------------------------------------------------------


@pytest.mark.parametrize("use_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_simple_rnn(keras, activation, return_sequences, use_bias, rng):
    dtype = np.float32
    kl = _simple_rnn(
        keras,
        rng,
        dtype,
        activation=activation,
        use_bias=use_bias,
        return_sequences=return_sequences,
    )
    x = _x(rng, dtype)
    expected = _np(kl(x))

    # PyTorch's calling convention: (y, h_n)
    layer = rnnfast.RNN(D, H, nonlinearity=activation, bias=use_bias, batch_first=True, dtype=dtype)
    interop.load_keras(layer, kl)
    y, h_n = layer(x)
    assert_close(y if return_sequences else h_n[0], expected, dtype, "output")

    # Keras's: the output alone
    layer = _loaded(
        kl, nonlinearity=activation, bias=use_bias, dtype=dtype, return_sequences=return_sequences
    )
    assert_close(layer(x), expected, dtype, "output")


@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
def test_simple_rnn_return_state_and_initial_state(keras, return_sequences, rng):
    dtype = np.float32
    kl = _simple_rnn(keras, rng, dtype, return_sequences=return_sequences, return_state=True)
    x = _x(rng, dtype)
    h0 = rng.uniform(-1, 1, size=(B, H)).astype(dtype)
    out_k, state_k = _np(kl(x, initial_state=[h0]))

    layer = _loaded(kl, return_sequences=return_sequences, return_state=True)
    out, h_n = layer(x, h0[None])
    assert_close(out, out_k, dtype, "output")
    assert_close(h_n[0], state_k, dtype, "state")


@pytest.mark.parametrize("how", ["mask", "lengths", "Masking"])
@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_simple_rnn_masked(keras, activation, return_sequences, how, rng):
    dtype = np.float32
    x = _x(rng, dtype, LENGTHS)
    # zeros at padded steps (rnnfast's convention) when returning sequences; when returning the
    # last output, Keras's default carries each sequence's last valid output there (with
    # zero_output_for_mask=True a padded sequence's last output would be zeros). Bidirectional
    # makes the same choice.
    kl = _simple_rnn(
        keras,
        rng,
        dtype,
        activation=activation,
        return_sequences=return_sequences,
        zero_output_for_mask=return_sequences,
    )
    if how == "Masking":
        expected = _np(kl(x, mask=keras.layers.Masking(0.0).compute_mask(x)))
    else:
        expected = _np(kl(x, mask=_mask(LENGTHS)))

    layer = _loaded(kl, nonlinearity=activation, return_sequences=return_sequences)
    kw = {"lengths": LENGTHS} if how == "lengths" else {"mask": _mask(LENGTHS)}
    assert_close(_call(layer, x, **kw), expected, dtype, "output")

    # PyTorch's convention: y zero past each length, h_n at each sequence's own last step
    torch_layer = rnnfast.RNN(D, H, nonlinearity=activation, batch_first=True)
    interop.load_keras(torch_layer, kl)
    y, h_n = _call(torch_layer, x, **kw)
    assert_close(y if return_sequences else h_n[0], expected, dtype, "output")


def test_simple_rnn_masked_steps_repeat_the_output_by_default(keras, rng):
    """Keras's default (zero_output_for_mask=False): a masked step repeats the last output;
    rnnfast outputs zeros there. The valid steps agree."""
    dtype = np.float32
    x = _x(rng, dtype, LENGTHS)
    kl = _simple_rnn(keras, rng, dtype, return_sequences=True)
    expected = _np(kl(x, mask=_mask(LENGTHS)))
    layer = rnnfast.RNN(D, H, batch_first=True)
    interop.load_keras(layer, kl)
    y, h_n = _call(layer, x, lengths=LENGTHS)
    valid = _mask(LENGTHS)
    assert_close(y[valid], expected[valid], dtype, "valid steps")
    assert np.all(y[~valid] == 0)
    for b, n in enumerate(LENGTHS):
        carried = h_n[0, b] if n else np.zeros(H, dtype)
        assert_close(expected[b, n:], np.broadcast_to(carried, (T - n, H)), dtype, "padding")


@pytest.mark.parametrize("masked", [False, True], ids=["full", "masked"])
@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_simple_rnn_go_backwards(keras, activation, return_sequences, masked, rng):
    dtype = np.float32
    x = _x(rng, dtype, LENGTHS if masked else None)
    kl = _simple_rnn(
        keras,
        rng,
        dtype,
        activation=activation,
        return_sequences=return_sequences,
        go_backwards=True,
    )
    kw = {"mask": _mask(LENGTHS)} if masked else {}
    expected = _np(kl(x, **kw))

    layer = _loaded(
        kl, nonlinearity=activation, go_backwards=True, return_sequences=return_sequences
    )
    assert_close(_call(layer, x, **kw), expected, dtype, "output")


# ---- Bidirectional ------------------------------------------------------------------------------


@pytest.mark.parametrize("masked", [False, True], ids=["full", "masked"])
@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
@pytest.mark.parametrize("merge_mode", MERGE_MODES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_bidirectional(keras, activation, merge_mode, return_sequences, masked, rng):
    dtype = np.float32
    x = _x(rng, dtype, LENGTHS if masked else None)
    kl = _bidirectional(
        keras, rng, dtype, merge_mode, activation=activation, return_sequences=return_sequences
    )
    kw = {"mask": _mask(LENGTHS)} if masked else {}
    expected = _np(kl(x, **kw))

    layer = _loaded(
        kl,
        nonlinearity=activation,
        bidirectional=True,
        merge_mode=merge_mode,
        return_sequences=return_sequences,
    )
    assert_close(_call(layer, x, **kw), expected, dtype, "output")


def test_bidirectional_return_state(keras, rng):
    dtype = np.float32
    x = _x(rng, dtype, LENGTHS)
    kl = _bidirectional(keras, rng, dtype, "concat", return_sequences=True, return_state=True)
    out_k, h_fwd, h_bwd = _np(kl(x, mask=_mask(LENGTHS)))

    layer = _loaded(kl, bidirectional=True, dtype=dtype, return_sequences=True, return_state=True)
    out, h_n = _call(layer, x, lengths=LENGTHS)
    assert_close(out, out_k, dtype, "output")
    assert_close(h_n[0], h_fwd, dtype, "forward state")
    assert_close(h_n[1], h_bwd, dtype, "backward state")


# ---- stacks and models --------------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bidir"])
def test_stacked_model(keras, bidirectional, rng):
    dtype = np.float32

    def rnn(return_sequences):
        cell = keras.layers.SimpleRNN(H, activation="relu", return_sequences=return_sequences)
        return keras.layers.Bidirectional(cell) if bidirectional else cell

    model = keras.Sequential(
        [keras.Input((T, D)), keras.layers.Masking(0.0), rnn(True), rnn(True), rnn(False)]
    )
    for kl in model.layers:
        if kl.weights:
            _random_weights(kl, rng, dtype)
    x = _x(rng, dtype, LENGTHS)
    expected = _np(model(x))

    def stack():
        return _rnnfast(
            input_size=D,
            hidden_size=H,
            num_layers=3,
            nonlinearity="relu",
            batch_first=True,
            bidirectional=bidirectional,
            return_sequences=False,
        )

    layer = stack()
    interop.load_keras(layer, model)  # the Masking layer has no weights: passed over
    assert_close(_call(layer, x, lengths=LENGTHS), expected, dtype, "model output")

    # model.get_weights() order = interop.keras_weights order
    other = stack()
    interop.load_keras(other, [w for kl in model.layers for w in interop._keras_layer_weights(kl)])
    for k, v in other.state_dict().items():
        np.testing.assert_array_equal(v, layer.state_dict()[k])


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bidir"])
def test_rnnfast_weights_into_keras(keras, bidirectional, rng):
    """PyTorch layout -> Keras (bias_ih + bias_hh in Keras's one bias) computes the same."""
    dtype = np.float32
    layer = _rnnfast(
        input_size=D,
        hidden_size=H,
        batch_first=True,
        bidirectional=bidirectional,
        dtype=dtype,
        seed=4,
    )
    kl = (
        _bidirectional(keras, rng, dtype, "concat", return_sequences=True)
        if bidirectional
        else _simple_rnn(keras, rng, dtype, return_sequences=True)
    )
    kl.set_weights(interop.keras_weights(layer))
    x = _x(rng, dtype)
    assert_close(layer(x)[0], _np(kl(x)), dtype, "output")


# ---- parameter counts and mismatches -----------------------------------------------------------


@pytest.mark.parametrize(
    "d, h, bidirectional, use_bias",
    [
        (1, 50, False, True),
        (50, 100, False, True),
        (8, 64, False, True),
        (64, 32, False, True),
        (3, 5, False, False),
        (1, 50, True, True),
    ],
)
def test_summary_counts_are_keras_counts(keras, d, h, bidirectional, use_bias):
    cell = keras.layers.SimpleRNN(h, use_bias=use_bias)
    kl = keras.layers.Bidirectional(cell) if bidirectional else cell
    kl.build((None, None, d))
    layer = _rnnfast(input_size=d, hidden_size=h, bias=use_bias, bidirectional=bidirectional)
    text = persistence.summary_text(layer)
    total = next(ln for ln in text.splitlines() if ln.startswith("Total params"))
    assert int(total.split(":")[1].split()[0].replace(",", "")) == kl.count_params()


def test_load_keras_rejects_mismatches(keras, rng):
    dtype = np.float32
    layer = rnnfast.RNN(D, H, batch_first=True)
    before = layer.state_dict()
    with pytest.raises(ValueError, match="activation 'relu'"):
        interop.load_keras(layer, _simple_rnn(keras, rng, dtype, activation="relu"))
    with pytest.raises(ValueError, match="go_backwards"):
        interop.load_keras(layer, _simple_rnn(keras, rng, dtype, go_backwards=True))
    with pytest.raises(ValueError, match="bidirectional"):
        interop.load_keras(layer, _bidirectional(keras, rng, dtype, "concat"))
    with pytest.raises(ValueError, match="num_layers=1"):
        interop.load_keras(layer, [_simple_rnn(keras, rng, dtype)] * 2)
    lstm = keras.layers.LSTM(H)
    lstm.build((None, T, D))
    with pytest.raises(TypeError, match="LSTM"):
        interop.load_keras(layer, [lstm])
    with pytest.raises(ValueError, match="weight_ih_l0"):
        interop.load_keras(layer, _simple_rnn(keras, rng, dtype, input_dim=D + 1))
    for k, v in layer.state_dict().items():
        np.testing.assert_array_equal(v, before[k])

    bidir = _rnnfast(input_size=D, hidden_size=H, bidirectional=True, merge_mode="sum")
    with pytest.raises(ValueError, match="merge_mode"):
        interop.load_keras(bidir, _bidirectional(keras, rng, dtype, "concat"))
