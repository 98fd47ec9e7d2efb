"""Keras 3 (torch backend) as an oracle for rnnfast.GRU and rnnfast.LSTM: Keras GRU (both
``reset_after`` forms), LSTM and their Bidirectional with random weights loaded through
``rnnfast.interop.load_keras`` give the same outputs and states, prefix masks, go_backwards and
stateful layers included; and the golden values of Keras's own gru_test.py / lstm_test.py.

Keras's semantics that matter here (see also tests/nn/test_rnn_keras_parity.py):
- a masked step keeps the state (h and c); its output repeats the previous output (zeros
  before the first valid step) unless ``zero_output_for_mask=True``, which gives zeros
  (Bidirectional forces it when returning sequences); load_keras carries the option;
- Keras with ``zero_output_for_mask=True`` and ``return_sequences=False`` gives zeros for a
  sequence whose last step is masked, where rnnfast (the Elman layer too) gives the
  sequence's last valid output: not compared here;
- ``go_backwards`` reverses the sequence and the mask, and returns the outputs in that
  processing order;
- Keras 3.15's torch backend computes float64 matmuls in float32 (see the Elman tests): Keras
  is an oracle in float32 only.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close

import rnnfast
from rnnfast import interop, persistence

T, B, D, H = 7, 4, 5, 6
LENGTHS = np.array([7, 3, 1, 0])  # full, partial, one step, empty
MERGE_MODES = ["concat", "sum", "mul", "ave"]
# the cells as (Keras layer, rnnfast layer class, options of both)
CELLS = {
    "gru": ("GRU", rnnfast.GRU, {"reset_after": True}),
    "gru_reset_before": ("GRU", rnnfast.GRU, {"reset_after": False}),
    "lstm": ("LSTM", rnnfast.LSTM, {}),
}
DTYPE = np.float32


def _np(out):
    """A Keras (torch backend) output, or a list of them, as NumPy."""
    if isinstance(out, (list, tuple)):
        return [_np(o) for o in out]
    return out.detach().cpu().numpy()


def _random_weights(layer, rng):
    """Random weights for every variable of a built Keras layer (small: relu stays tame)."""
    weights = [rng.uniform(-0.6, 0.6, size=tuple(v.shape)).astype(DTYPE) for v in layer.weights]
    layer.set_weights(weights)
    return weights


def _keras_cell(keras, cell, **kw):
    name, _, options = CELLS[cell]
    return getattr(keras.layers, name)(H, **options, **kw)


def _keras_layer(keras, rng, cell, *, bidirectional=False, merge_mode="concat", **kw):
    kl = _keras_cell(keras, cell, **kw)
    if bidirectional:
        kl = keras.layers.Bidirectional(kl, merge_mode=merge_mode)
    kl.build((None, T, D))
    _random_weights(kl, rng)
    return kl


def _loaded(cell, kl, **options):
    """An rnnfast layer of ``cell`` (batch first, D and H, ``options``) holding ``kl``'s
    weights."""
    _, cls, cell_options = CELLS[cell]
    layer = cls(D, H, batch_first=True, dtype=DTYPE, **cell_options, **options)
    assert interop.load_keras(layer, kl) is layer
    return layer


def _x(rng, lengths=None):
    """(B, T, D) input; zeros past each length (so keras.layers.Masking finds the same mask)."""
    x = rng.standard_normal((B, T, D)).astype(DTYPE)
    if lengths is not None:
        x[np.arange(T)[None, :] >= lengths[:, None]] = 0.0
    return x


def _mask(lengths, steps=T):
    return np.arange(steps)[None, :] < lengths[:, None]


def _states(cell, h_n):
    """rnnfast's states (PyTorch's (num_layers*dirs, B, R) arrays: h_n, or the LSTM's (h_n,
    c_n)) as Keras lists them after the output: per direction h (and c)."""
    parts = h_n if cell == "lstm" else (h_n,)
    return [p[d] for d in range(parts[0].shape[0]) for p in parts]


# ---- one layer ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variant",
    [
        {},
        {"activation": "relu", "recurrent_activation": "hard_sigmoid"},
        {"use_bias": False},
    ],
    ids=["default", "relu-hard_sigmoid", "nobias"],
)
@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
@pytest.mark.parametrize("cell", CELLS)
def test_keras_layer(keras, cell, return_sequences, variant, rng):
    kl = _keras_layer(keras, rng, cell, return_sequences=return_sequences, **variant)
    x = _x(rng)
    expected = _np(kl(x))
    options = {k: v for k, v in variant.items() if k != "use_bias"}
    bias = variant.get("use_bias", True)

    # PyTorch's calling convention: (y, h_n) or (y, (h_n, c_n))
    layer = _loaded(cell, kl, bias=bias, **options)
    y, state = layer(x)
    h_n = state[0] if cell == "lstm" else state
    assert_close(y if return_sequences else h_n[0], expected, DTYPE, "output")

    # Keras's: the output alone
    layer = _loaded(cell, kl, bias=bias, return_sequences=return_sequences, **options)
    assert_close(layer(x), expected, DTYPE, "output")


@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
@pytest.mark.parametrize("cell", CELLS)
def test_return_state_and_initial_state(keras, cell, return_sequences, rng):
    kl = _keras_layer(keras, rng, cell, return_sequences=return_sequences, return_state=True)
    x = _x(rng)
    states = [
        rng.uniform(-1, 1, size=(B, H)).astype(DTYPE) for _ in range(2 if cell == "lstm" else 1)
    ]
    out_k, *states_k = _np(kl(x, initial_state=states))

    layer = _loaded(cell, kl, return_sequences=return_sequences, return_state=True)
    h0 = tuple(s[None] for s in states) if cell == "lstm" else states[0][None]
    out, *states_r = layer(x, h0)
    assert_close(out, out_k, DTYPE, "output")
    assert len(states_r) == len(states_k)
    for i, (got, want) in enumerate(zip(states_r, states_k)):
        assert_close(got[0], want, DTYPE, f"state {i}")


@pytest.mark.parametrize("how", ["mask", "lengths", "Masking"])
@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
@pytest.mark.parametrize("cell", CELLS)
def test_prefix_masks(keras, cell, return_sequences, how, rng):
    x = _x(rng, LENGTHS)
    # zeros at masked steps (rnnfast's convention) when returning sequences; when returning the
    # last output, Keras's default gives each sequence's last valid output, as rnnfast does
    # (see the module's docstring for zero_output_for_mask=True there)
    kl = _keras_layer(
        keras, rng, cell, return_sequences=return_sequences, zero_output_for_mask=return_sequences
    )
    mask = keras.layers.Masking(0.0).compute_mask(x) if how == "Masking" else _mask(LENGTHS)
    expected = _np(kl(x, mask=mask))

    layer = _loaded(cell, kl, return_sequences=return_sequences)
    kw = {"lengths": LENGTHS} if how == "lengths" else {"mask": _mask(LENGTHS)}
    assert_close(layer(x, **kw), expected, DTYPE, "output")

    # PyTorch's form: y zero past each length, h_n at each sequence's own last step
    layer = _loaded(cell, kl)
    y, state = layer(x, **kw)
    h_n = state[0] if cell == "lstm" else state
    assert_close(y if return_sequences else h_n[0], expected, DTYPE, "output")


@pytest.mark.parametrize("cell", CELLS)
def test_masked_steps_repeat_the_output_by_default(keras, cell, rng):
    """Keras's default (zero_output_for_mask=False, carried by load_keras): a masked step
    repeats the last output, and the states are each sequence's last valid ones."""
    x = _x(rng, LENGTHS)
    kl = _keras_layer(keras, rng, cell, return_sequences=True, return_state=True)
    out_k, *states_k = _np(kl(x, mask=_mask(LENGTHS)))
    layer = _loaded(cell, kl, return_sequences=True, return_state=True)
    assert layer.zero_output_for_mask is False
    out, *states = layer(x, mask=_mask(LENGTHS))
    assert_close(out, out_k, DTYPE, "output")
    for i, (got, want) in enumerate(zip(states, states_k)):
        assert_close(got[0], want, DTYPE, f"state {i}")
    for b, n in enumerate(LENGTHS):  # Keras repeats h there (zeros for an empty sequence)
        assert_close(out_k[b, n:], np.broadcast_to(states_k[0][b], (T - n, H)), DTYPE, "padding")


@pytest.mark.parametrize("go_backwards", [False, True], ids=["fwd", "go_backwards"])
@pytest.mark.parametrize("zero_output", [False, True], ids=["repeat", "zeros"])
@pytest.mark.parametrize("cell", CELLS)
def test_general_masks(keras, cell, zero_output, go_backwards, rng):
    """A mask with holes (Keras's general masks) and return_state."""
    x = _x(rng)
    mask = rng.random((B, T)) < 0.6
    mask[:, 0] = [True, False, True, False]
    kl = _keras_layer(
        keras,
        rng,
        cell,
        return_sequences=True,
        return_state=True,
        zero_output_for_mask=zero_output,
        go_backwards=go_backwards,
    )
    out_k, *states_k = _np(kl(x, mask=mask))
    layer = _loaded(cell, kl, return_sequences=True, return_state=True, go_backwards=go_backwards)
    assert layer.zero_output_for_mask is zero_output
    out, *states = layer(x, mask=mask)
    assert_close(out, out_k, DTYPE, "output")
    for i, (got, want) in enumerate(zip(states, states_k)):
        assert_close(got[0], want, DTYPE, f"state {i}")


@pytest.mark.parametrize("masked", [False, True], ids=["full", "masked"])
@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
@pytest.mark.parametrize("cell", CELLS)
def test_go_backwards(keras, cell, return_sequences, masked, rng):
    x = _x(rng, LENGTHS if masked else None)
    kl = _keras_layer(keras, rng, cell, return_sequences=return_sequences, go_backwards=True)
    kw = {"mask": _mask(LENGTHS)} if masked else {}
    expected = _np(kl(x, **kw))

    layer = _loaded(cell, kl, go_backwards=True, return_sequences=return_sequences)
    assert_close(layer(x, **kw), expected, DTYPE, "output")


@pytest.mark.parametrize("cell", CELLS)
def test_stateful(keras, cell, rng):
    """Two calls carry the state (Keras: stateful=True and a fixed batch size), and
    reset_states() starts over."""
    kl = _keras_cell(keras, cell, stateful=True, return_sequences=True)
    kl.build((B, T, D))
    _random_weights(kl, rng)
    x1, x2 = _x(rng), _x(rng)
    layer = _loaded(cell, kl, stateful=True, return_sequences=True)
    for _ in range(2):
        for x in (x1, x2):
            assert_close(layer(x), _np(kl(x)), DTYPE, "output")
        kl.reset_states()
        layer.reset_states()


# ---- Bidirectional ------------------------------------------------------------------------------


@pytest.mark.parametrize("masked, return_sequences", [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("merge_mode", MERGE_MODES)
@pytest.mark.parametrize("cell", CELLS)
def test_bidirectional(keras, cell, merge_mode, return_sequences, masked, rng):
    x = _x(rng, LENGTHS if masked else None)
    kl = _keras_layer(
        keras,
        rng,
        cell,
        bidirectional=True,
        merge_mode=merge_mode,
        return_sequences=return_sequences,
    )
    kw = {"mask": _mask(LENGTHS)} if masked else {}
    expected = _np(kl(x, **kw))

    layer = _loaded(
        cell, kl, bidirectional=True, merge_mode=merge_mode, return_sequences=return_sequences
    )
    assert_close(layer(x, **kw), expected, DTYPE, "output")


@pytest.mark.parametrize("merge_mode", ["concat", None])
@pytest.mark.parametrize("cell", CELLS)
def test_bidirectional_return_state(keras, cell, merge_mode, rng):
    """The same values as Keras's, in rnnfast's form: Keras's Bidirectional(LSTM(...,
    return_state=True)) returns [out, h_fw, c_fw, h_bw, c_bw] (merge_mode=None: [out_fw, out_bw,
    h_fw, c_fw, h_bw, c_bw]); rnnfast returns (out, h_n, c_n) with h_n and c_n (2, B, H), the
    directions on their first axis, as its unidirectional layers and its Elman layer do
    (merge_mode=None: [out_fw, out_bw, h_n, c_n]). ``_states`` maps one to the other."""
    x = _x(rng, LENGTHS)
    kl = _keras_layer(
        keras,
        rng,
        cell,
        bidirectional=True,
        merge_mode=merge_mode,
        return_sequences=True,
        return_state=True,
    )
    expected = _np(kl(x, mask=_mask(LENGTHS)))
    outputs = 2 if merge_mode is None else 1

    layer = _loaded(
        cell,
        kl,
        bidirectional=True,
        merge_mode=merge_mode,
        return_sequences=True,
        return_state=True,
    )
    got = list(layer(x, lengths=LENGTHS))
    got = got[:outputs] + _states(cell, got[outputs:] if cell == "lstm" else got[outputs])
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected)):
        assert_close(a, b, DTYPE, f"result {i}")


# ---- stacks, models and the weights' way back ----------------------------------------------------


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bidir"])
@pytest.mark.parametrize("cell", CELLS)
def test_stacked_model(keras, cell, bidirectional, rng):
    def rnn(return_sequences):
        kl = _keras_cell(keras, cell, return_sequences=return_sequences)
        return keras.layers.Bidirectional(kl) if bidirectional else kl

    model = keras.Sequential(
        [keras.Input((T, D)), keras.layers.Masking(0.0), rnn(True), rnn(True), rnn(False)]
    )
    for kl in model.layers:
        if kl.weights:
            _random_weights(kl, rng)
    x = _x(rng, LENGTHS)
    expected = _np(model(x))

    def stack():
        _, cls, options = CELLS[cell]
        return cls(
            D,
            H,
            num_layers=3,
            batch_first=True,
            bidirectional=bidirectional,
            return_sequences=False,
            **options,
        )

    layer = stack()
    interop.load_keras(layer, model)  # the Masking layer has no weights: passed over
    assert_close(layer(x, lengths=LENGTHS), expected, DTYPE, "model output")

    # model.get_weights() order = interop.keras_weights order, both ways, exactly
    flat = [w for kl in model.layers for w in interop._keras_layer_weights(kl)]
    other = interop.load_keras(stack(), flat)
    for k, v in other.state_dict().items():
        np.testing.assert_array_equal(v, layer.state_dict()[k])
    back = interop.keras_weights(layer)
    assert len(back) == len(flat)
    for a, b in zip(back, flat):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bidir"])
@pytest.mark.parametrize("cell", CELLS)
def test_rnnfast_weights_into_keras(keras, cell, bidirectional, rng):
    """PyTorch layout -> Keras (gates reordered; the biases stacked for reset_after=True,
    summed otherwise) computes the same."""
    _, cls, options = CELLS[cell]
    layer = cls(D, H, batch_first=True, bidirectional=bidirectional, dtype=DTYPE, seed=4, **options)
    kl = _keras_layer(keras, rng, cell, bidirectional=bidirectional, return_sequences=True)
    kl.set_weights(interop.keras_weights(layer))
    x = _x(rng)
    assert_close(layer(x)[0], _np(kl(x)), DTYPE, "output")


# ---- options and mismatches ----------------------------------------------------------------------


def test_load_keras_carries_dropout(keras, rng):
    kl = _keras_layer(keras, rng, "lstm", dropout=0.25, recurrent_dropout=0.5)
    layer = _loaded("lstm", kl)
    assert layer.input_dropout == 0.25 and layer.recurrent_dropout == 0.5
    kl = _keras_layer(keras, rng, "gru", zero_output_for_mask=True)
    assert _loaded("gru", kl).zero_output_for_mask is True


def test_load_keras_rejects_mismatches(keras, rng):
    layer = rnnfast.GRU(D, H, batch_first=True)
    before = layer.state_dict()
    checks = [
        (
            ValueError,
            "recurrent_activation 'tanh' is not supported",
            dict(recurrent_activation="tanh"),
        ),
        (ValueError, "activation 'sigmoid' is not supported", dict(activation="sigmoid")),
        (ValueError, "activation 'relu' differs", dict(activation="relu")),
        (
            ValueError,
            "recurrent_activation 'hard_sigmoid' differs",
            dict(recurrent_activation="hard_sigmoid"),
        ),
        (ValueError, "use_bias=False", dict(use_bias=False)),
        (ValueError, "go_backwards", dict(go_backwards=True)),
    ]
    for error, match, kw in checks:
        with pytest.raises(error, match=match):
            interop.load_keras(layer, _keras_layer(keras, rng, "gru", **kw))
    with pytest.raises(ValueError, match="reset_after=False differs"):
        interop.load_keras(layer, _keras_layer(keras, rng, "gru_reset_before"))
    with pytest.raises(TypeError, match="expected a GRU"):
        interop.load_keras(layer, _keras_layer(keras, rng, "lstm"))
    with pytest.raises(ValueError, match="bidirectional"):
        interop.load_keras(layer, _keras_layer(keras, rng, "gru", bidirectional=True))
    with pytest.raises(ValueError, match="num_layers=1"):
        interop.load_keras(layer, [_keras_layer(keras, rng, "gru")] * 2)
    with pytest.raises(ValueError, match=r"bias: expected shape \(2, 3H\)"):
        interop.load_keras(
            layer, interop._keras_layer_weights(_keras_layer(keras, rng, "gru_reset_before"))
        )
    # the options go back when the weights do not fit
    kl = _keras_cell(keras, "gru", dropout=0.3, zero_output_for_mask=True)
    kl.build((None, T, D + 1))
    with pytest.raises(ValueError, match="weight_ih_l0"):
        interop.load_keras(layer, kl)
    for k, v in layer.state_dict().items():
        np.testing.assert_array_equal(v, before[k])
    assert layer.input_dropout == 0.0 and layer.zero_output_for_mask is None

    lstm = rnnfast.LSTM(D, H, proj_size=3)
    with pytest.raises(ValueError, match="projection"):
        interop.load_keras(lstm, _keras_layer(keras, rng, "lstm"))
    with pytest.raises(ValueError, match="proj_size"):
        interop.keras_weights(lstm)
    bidir = rnnfast.LSTM(D, H, bidirectional=True, merge_mode="sum")
    with pytest.raises(ValueError, match="merge_mode"):
        interop.load_keras(bidir, _keras_layer(keras, rng, "lstm", bidirectional=True))
    with pytest.raises(TypeError, match="expected a LSTM"):
        interop.load_keras(rnnfast.LSTM(D, H), _keras_layer(keras, rng, "gru"))


@pytest.mark.parametrize(
    "cell, bidirectional",
    [("gru", False), ("gru_reset_before", False), ("lstm", False), ("lstm", True)],
)
def test_summary_counts_are_keras_counts(keras, cell, bidirectional, rng):
    kl = _keras_layer(keras, rng, cell, bidirectional=bidirectional)
    _, cls, options = CELLS[cell]
    layer = cls(D, H, bidirectional=bidirectional, **options)
    assert layer.keras_param_count() == kl.count_params()
    text = persistence.summary_text(layer)
    total = next(ln for ln in text.splitlines() if ln.startswith("Total params"))
    assert int(total.split(":")[1].split()[0].replace(",", "")) == kl.count_params()


# ---- the weight layout without Keras -------------------------------------------------------------


def test_keras_layout_by_hand(rng):
    """Keras's gate blocks (GRU z, r, h; LSTM i, f, c, o) land in PyTorch's (r, z, n; i, f, g,
    o), transposed, and the biases split as the module's docstring says; and back."""
    kernel = rng.standard_normal((D, 3 * H))
    recurrent = rng.standard_normal((H, 3 * H))
    bias = rng.standard_normal((2, 3 * H))
    sd = interop.keras_gru_to_state_dict([kernel, recurrent, bias])
    z, r, h = np.split(kernel, 3, axis=1)
    np.testing.assert_array_equal(sd["weight_ih_l0"], np.concatenate([r, z, h], axis=1).T)
    z, r, h = np.split(recurrent, 3, axis=1)
    np.testing.assert_array_equal(sd["weight_hh_l0"], np.concatenate([r, z, h], axis=1).T)
    for row, name in enumerate(("bias_ih_l0", "bias_hh_l0")):
        z, r, h = np.split(bias[row], 3)
        np.testing.assert_array_equal(sd[name], np.concatenate([r, z, h]))
    assert all(v.flags.c_contiguous for v in sd.values())
    back = interop.state_dict_to_keras_gru(sd)
    for a, b in zip(back, [kernel, recurrent, bias]):
        np.testing.assert_array_equal(a, b)

    sd = interop.keras_gru_to_state_dict(
        [kernel, recurrent, bias[0]], layer_index=1, reverse=True, reset_after=False
    )
    assert list(sd) == [f"{k}_l1_reverse" for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    np.testing.assert_array_equal(sd["bias_hh_l1_reverse"], np.zeros(3 * H))
    back = interop.state_dict_to_keras_gru(sd, 1, True, reset_after=False)
    np.testing.assert_array_equal(back[2], bias[0])

    kernel = rng.standard_normal((D, 4 * H))
    sd = interop.keras_lstm_to_state_dict([kernel, rng.standard_normal((H, 4 * H))])
    np.testing.assert_array_equal(sd["weight_ih_l0"], kernel.T)  # the same gate order
    assert list(sd) == ["weight_ih_l0", "weight_hh_l0"]
    with pytest.raises(ValueError, match="recurrent_kernel"):
        interop.keras_lstm_to_state_dict([kernel, np.zeros((H, 3 * H))])
    with pytest.raises(ValueError, match="kernel"):
        interop.keras_gru_to_state_dict([np.zeros((D, 3 * H + 1)), recurrent])
    with pytest.raises(ValueError, match=r"\(3H,\).*reset_after=False"):
        interop.keras_gru_to_state_dict([kernel[:, : 3 * H], recurrent, bias], reset_after=False)


# ---- the golden values of Keras's own tests ------------------------------------------------------
# Keras 3.15.1's keras/src/layers/rnn/gru_test.py and lstm_test.py check their layers with
# constant initializers (kernel 0.01, recurrent kernel 0.02, bias 0.03) against hard-coded
# outputs; the same weights, loaded as Keras arrays, give those outputs here (float32, within
# the tests' own atol = rtol = 1e-5). No Keras needed.

GOLDEN_TOL = {"atol": 1e-5, "rtol": 1e-5}


def _constant_keras_weights(cell, d, units, use_bias=True, unit_forget_bias=False):
    """Keras's weights of a layer built with Constant(0.01) / Constant(0.02) / Constant(0.03)
    initializers (the LSTM's unit_forget_bias makes its forget block ones, as Keras's build)."""
    G = 4 if cell == "lstm" else 3
    weights = [np.full((d, G * units), 0.01, DTYPE), np.full((units, G * units), 0.02, DTYPE)]
    if use_bias:
        shape = (2, G * units) if cell == "gru" else (G * units,)
        bias = np.full(shape, 0.03, DTYPE)
        if unit_forget_bias:
            bias[units : 2 * units] = 1.0
        weights.append(bias)
    return weights


def _golden_layer(cell, d, units, use_bias=True, unit_forget_bias=False, **options):
    _, cls, cell_options = CELLS[cell]
    layer = cls(d, units, bias=use_bias, batch_first=True, **cell_options, **options)
    weights = _constant_keras_weights(cell, d, units, use_bias, unit_forget_bias)
    return interop.load_keras(layer, weights)


@pytest.mark.parametrize(
    "cell, options, expected",
    [
        # gru_test.py, GRUTest.test_correctness (default; go_backwards; reset_after=False;
        # use_bias=False)
        ("gru", {}, [0.5217289, 0.6371659, 0.39384964]),
        ("gru", {"go_backwards": True}, [0.24406259, 0.611516, 0.3928808]),
        ("gru_reset_before", {}, [0.51447755, 0.6426879, 0.40208298]),
        ("gru", {"use_bias": False}, [0.49988455, 0.64701194, 0.4103359]),
        # lstm_test.py, LSTMTest.test_correctness (Keras's default unit_forget_bias=True;
        # go_backwards; unit_forget_bias=False; use_bias=False)
        ("lstm", {"unit_forget_bias": True}, [0.6288687, 0.86899155, 0.9460773]),
        (
            "lstm",
            {"unit_forget_bias": True, "go_backwards": True},
            [0.35622165, 0.74789524, 0.8872726],
        ),
        ("lstm", {}, [0.57019705, 0.8661914, 0.9459622]),
        ("lstm", {"use_bias": False}, [0.54986924, 0.86226785, 0.9443936]),
    ],
    ids=[
        "gru",
        "gru-go_backwards",
        "gru-reset_before",
        "gru-nobias",
        "lstm",
        "lstm-go_backwards",
        "lstm-no_unit_forget_bias",
        "lstm-nobias",
    ],
)
def test_golden_correctness(cell, options, expected):
    sequence = np.arange(72).reshape((3, 6, 4)).astype(DTYPE)
    options = dict(options)
    weights = {k: options.pop(k) for k in ("use_bias", "unit_forget_bias") if k in options}
    layer = _golden_layer(cell, 4, 3, return_sequences=False, **weights, **options)
    expected = np.repeat(np.array(expected, DTYPE)[:, None], 3, axis=1)
    np.testing.assert_allclose(layer(sequence), expected, **GOLDEN_TOL)


@pytest.mark.parametrize(
    "cell, expected",
    [
        # gru_test.py, GRUTest.test_statefulness
        ("gru", [0.29542392, 0.5885018]),
        # lstm_test.py, LSTMTest.test_statefulness (unit_forget_bias=True, Keras's default)
        ("lstm", [0.3124785, 0.6863672]),
    ],
)
def test_golden_statefulness(cell, expected):
    sequence = np.arange(24).reshape((2, 3, 4)).astype(DTYPE)
    layer = _golden_layer(
        cell, 4, 4, unit_forget_bias=cell == "lstm", stateful=True, return_sequences=False
    )
    expected = np.repeat(np.array(expected, DTYPE)[:, None], 4, axis=1)
    for _ in range(2):  # the second call's output, and again after reset_states()
        layer(sequence)
        np.testing.assert_allclose(layer(sequence), expected, **GOLDEN_TOL)
        layer.reset_states()


@pytest.mark.parametrize(
    "cell, go_backwards, expected",
    [
        # gru_test.py, GRUTest.test_pass_initial_state (and test_pass_return_state)
        ("gru", False, [[0.23774096, 0.33508456], [0.83659905, 1.0227708]]),
        ("gru", True, [[0.13486053, 0.23261218], [0.78257304, 0.9691353]]),
        # lstm_test.py, LSTMTest.test_pass_initial_state (unit_forget_bias=True)
        ("lstm", False, [[0.20574439, 0.3558822], [0.64930826, 0.66276]]),
        ("lstm", True, [[0.13281618, 0.2790356], [0.5839337, 0.5992567]]),
    ],
)
def test_golden_initial_state(cell, go_backwards, expected):
    sequence = np.arange(24).reshape((2, 4, 3)).astype(DTYPE)
    state = np.arange(4).reshape((1, 2, 2)).astype(DTYPE)
    layer = _golden_layer(
        cell,
        3,
        2,
        unit_forget_bias=cell == "lstm",
        go_backwards=go_backwards,
        return_sequences=False,
        return_state=True,
    )
    out, *states = layer(sequence, (state, state) if cell == "lstm" else state)
    np.testing.assert_allclose(out, expected, **GOLDEN_TOL)
    np.testing.assert_allclose(states[0][0], expected, **GOLDEN_TOL)  # the output is h


def test_golden_lstm_masking():
    """lstm_test.py, LSTMTest.test_masking (unit_forget_bias=True, Keras's default)."""
    sequence = np.arange(24).reshape((2, 4, 3)).astype(DTYPE)
    mask = np.array([[True, True, True, False], [True, True, False, False]])
    layer = _golden_layer("lstm", 3, 2, unit_forget_bias=True, return_sequences=False)
    np.testing.assert_allclose(
        layer(sequence, mask=mask),
        [[0.11755939, 0.11755939], [0.28556206, 0.28556206]],
        **GOLDEN_TOL,
    )
    layer = _golden_layer(
        "lstm", 3, 2, unit_forget_bias=True, return_sequences=True, zero_output_for_mask=False
    )
    expected = [
        [[0.01588910] * 2, [0.05552048] * 2, [0.11755939] * 2, [0.11755939] * 2],
        [[0.14185596] * 2, [0.28556206] * 2, [0.28556206] * 2, [0.28556206] * 2],
    ]
    np.testing.assert_allclose(layer(sequence, mask=mask), expected, **GOLDEN_TOL)
    layer.zero_output_for_mask = True
    expected = [
        [[0.01588910] * 2, [0.05552048] * 2, [0.11755939] * 2, [0.0] * 2],
        [[0.14185596] * 2, [0.28556206] * 2, [0.0] * 2, [0.0] * 2],
    ]
    np.testing.assert_allclose(layer(sequence, mask=mask), expected, **GOLDEN_TOL)
    backwards_mask = np.array([[False, True, True, True], [False, False, True, True]])
    layer = _golden_layer(
        "lstm", 3, 2, unit_forget_bias=True, go_backwards=True, return_sequences=False
    )
    np.testing.assert_allclose(
        layer(sequence, mask=backwards_mask),
        [[0.15341201, 0.15341201], [0.3844719, 0.3844719]],
        **GOLDEN_TOL,
    )


def test_golden_gru_masking():
    """gru_test.py, GRUTest.test_masking: a mask with holes."""
    sequence = np.arange(24).reshape((2, 4, 3)).astype(DTYPE)
    mask = np.array([[True, True, False, True], [True, False, False, True]])
    layer = _golden_layer("gru", 3, 2, return_sequences=False)
    np.testing.assert_allclose(
        layer(sequence, mask=mask), [[0.19393763] * 2, [0.30818558] * 2], **GOLDEN_TOL
    )
    layer = _golden_layer("gru", 3, 2, return_sequences=True, zero_output_for_mask=False)
    expected = [
        [[0.03606692] * 2, [0.09497581] * 2, [0.09497581] * 2, [0.19393763] * 2],
        [[0.16051409] * 2, [0.16051409] * 2, [0.16051409] * 2, [0.30818558] * 2],
    ]
    np.testing.assert_allclose(layer(sequence, mask=mask), expected, **GOLDEN_TOL)
    layer.zero_output_for_mask = True
    expected = [
        [[0.03606692] * 2, [0.09497581] * 2, [0.0] * 2, [0.19393763] * 2],
        [[0.16051409] * 2, [0.0] * 2, [0.0] * 2, [0.30818558] * 2],
    ]
    np.testing.assert_allclose(layer(sequence, mask=mask), expected, **GOLDEN_TOL)
    layer = _golden_layer("gru", 3, 2, go_backwards=True, return_sequences=False)
    np.testing.assert_allclose(
        layer(sequence, mask=mask), [[0.11669192] * 2, [0.28380975] * 2], **GOLDEN_TOL
    )
