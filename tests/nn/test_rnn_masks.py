"""The RNN layer with Keras's general masks, input dropout and recurrent dropout: Keras's own
SimpleRNN / Bidirectional as the oracle (float32: Keras's torch backend computes float64
matmuls in float32), finite differences in float64, and the kernels' functional form for the
dropout masks the layer drew."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, numerical_gradient

import rnnfast
from rnnfast import Embedding, Sequential, functional, interop

T, B, D, H = 7, 4, 5, 6
F64 = np.float64


def _random_mask(rng, shape=(B, T)):
    """Masked steps anywhere: at the start, in the middle, at the end, a whole sequence."""
    mask = rng.random(shape) > 0.35
    mask[0] = True  # one sequence with every step
    mask[1, :2] = False  # one that starts masked
    mask[-1] = False  # and one with no kept step at all
    return mask


def _np(out):
    if isinstance(out, (list, tuple)):
        return [_np(o) for o in out]
    return out.detach().cpu().numpy()


def _keras_simple_rnn(keras, rng, **kw):
    kl = keras.layers.SimpleRNN(H, dtype="float32", **kw)
    kl.build((None, T, D))
    kl.set_weights(
        [rng.uniform(-0.6, 0.6, size=tuple(v.shape)).astype(np.float32) for v in kl.weights]
    )
    return kl


@pytest.mark.parametrize("go_backwards", [False, True], ids=["fwd", "go_backwards"])
@pytest.mark.parametrize("zero_output", [False, True], ids=["carry", "zeros"])
@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
def test_general_mask_matches_keras_simple_rnn(
    keras, return_sequences, zero_output, go_backwards, rng
):
    kl = _keras_simple_rnn(
        keras,
        rng,
        return_sequences=return_sequences,
        zero_output_for_mask=zero_output,
        go_backwards=go_backwards,
    )
    x = rng.standard_normal((B, T, D)).astype(np.float32)
    mask = _random_mask(rng)
    expected = _np(kl(x, mask=mask))
    layer = rnnfast.RNN(
        D, H, batch_first=True, return_sequences=return_sequences, go_backwards=go_backwards
    )
    interop.load_keras(layer, kl)  # maps zero_output_for_mask too
    assert layer.zero_output_for_mask is zero_output
    assert_close(layer(x, mask=mask), expected, np.float32, "output")


@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
def test_general_mask_matches_keras_bidirectional(keras, return_sequences, rng):
    kb = keras.layers.Bidirectional(keras.layers.SimpleRNN(H, return_sequences=return_sequences))
    kb.build((None, T, D))
    kb.set_weights(
        [rng.uniform(-0.6, 0.6, size=tuple(v.shape)).astype(np.float32) for v in kb.weights]
    )
    x = rng.standard_normal((B, T, D)).astype(np.float32)
    mask = _random_mask(rng)
    expected = _np(kb(x, mask=mask))
    layer = rnnfast.RNN(
        D, H, batch_first=True, bidirectional=True, return_sequences=return_sequences
    )
    interop.load_keras(layer, kb)
    assert_close(layer(x, mask=mask), expected, np.float32, "output")


def test_general_mask_matches_a_keras_stack(keras, rng):
    k1 = _keras_simple_rnn(keras, rng, return_sequences=True)
    k2 = keras.layers.SimpleRNN(H, dtype="float32")
    k2.build((None, T, H))
    k2.set_weights(
        [rng.uniform(-0.6, 0.6, size=tuple(v.shape)).astype(np.float32) for v in k2.weights]
    )
    x = rng.standard_normal((B, T, D)).astype(np.float32)
    mask = _random_mask(rng)
    expected = _np(k2(k1(x, mask=mask), mask=mask))
    layer = rnnfast.RNN(D, H, num_layers=2, batch_first=True, return_sequences=False)
    interop.load_keras(layer, [k1, k2])
    assert_close(layer(x, mask=mask), expected, np.float32, "output")


def test_mask_zero_ids_inside_sequences_match_keras(keras, rng):
    """Keras's Embedding(mask_zero=True) -> SimpleRNN with ids 0 anywhere, as a Sequential."""
    vocab = 11
    ids = rng.integers(1, vocab, size=(B, T))
    ids[_random_mask(rng) == False] = 0  # noqa: E712 - the masked steps
    ke = keras.layers.Embedding(vocab, D, mask_zero=True, dtype="float32")
    ke.build((None, T))
    table = rng.standard_normal((vocab, D)).astype(np.float32)
    ke.set_weights([table])
    kl = _keras_simple_rnn(keras, rng, return_sequences=True)
    expected = _np(kl(ke(ids), mask=ke.compute_mask(ids)))
    embed = Embedding(vocab, D, mask_zero=True)
    embed.load_state_dict({"weight": table})
    rnn = rnnfast.RNN(D, H, batch_first=True, return_sequences=True)
    interop.load_keras(rnn, kl)
    model = Sequential([embed, rnn])
    out = model.eval()(ids)
    valid = ids != 0
    np.testing.assert_array_equal(model.output_mask, valid)
    assert_close(out, expected, np.float32, "output")


def _loss_of(layer, x, weights, **kw):
    """A scalar loss of one training forward, and the layer's backward of it."""

    def loss():
        out = layer(x, **kw)
        out = out[0] if isinstance(out, tuple) else out
        return float(np.sum(out * weights))

    return loss


@pytest.mark.parametrize("zero_output", [False, True], ids=["carry", "zeros"])
@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
def test_general_mask_gradients_match_finite_differences(return_sequences, zero_output, rng):
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=2,
        bidirectional=True,
        batch_first=True,
        dtype=F64,
        return_sequences=return_sequences,
        zero_output_for_mask=zero_output,
        seed=3,
    )
    x = rng.standard_normal((B, T, D))
    mask = _random_mask(rng)
    out = layer(x, mask=mask)
    weights = rng.standard_normal(out.shape)
    dx, _ = layer.backward(weights)
    loss = _loss_of(layer, x, weights, mask=mask)
    np.testing.assert_allclose(dx, numerical_gradient(loss, x), rtol=1e-6, atol=1e-8)
    for name in ("weight_hh_l0", "weight_ih_l1_reverse", "bias_hh_l1"):
        layer.zero_grad()
        layer(x, mask=mask)
        layer.backward(weights)
        got = layer.grads[name].copy()
        np.testing.assert_allclose(
            got, numerical_gradient(loss, layer._params[name]), rtol=1e-6, atol=1e-8, err_msg=name
        )


@pytest.mark.parametrize("which", ["input", "recurrent", "both"])
def test_dropout_masks_give_exact_gradients(which, rng):
    """With the generator reset before every forward, each call draws the same masks: the
    backward is the exact gradient of that (fixed-mask) function."""
    p_in, p_rec = (0.3 if which != "recurrent" else 0.0), (0.4 if which != "input" else 0.0)
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=2,
        bidirectional=True,
        dtype=F64,
        seed=1,
        input_dropout=p_in,
        recurrent_dropout=p_rec,
    )
    x = rng.standard_normal((T, B, D))
    lengths = np.array([7, 3, 5, 1])
    weights = rng.standard_normal((T, B, 2 * H))

    def forward():
        layer._dropout_rng = np.random.default_rng(99)
        return layer(x, lengths=lengths)[0]

    weights_out = weights * (np.arange(T)[:, None] < lengths[None, :])[..., None]
    forward()
    dx, _ = layer.backward(weights_out)

    def loss():
        return float(np.sum(forward() * weights_out))

    np.testing.assert_allclose(dx, numerical_gradient(loss, x), rtol=1e-6, atol=1e-8)
    layer.zero_grad()
    forward()
    layer.backward(weights_out)
    got = layer.grads["weight_hh_l1_reverse"].copy()
    np.testing.assert_allclose(
        got, numerical_gradient(loss, layer._params["weight_hh_l1_reverse"]), rtol=1e-6, atol=1e-8
    )


def test_recurrent_dropout_is_the_kernels_recurrent_mask(rng):
    """The layer's forward equals the functional form given the mask it drew (one (B, H) mask
    per sequence, scaled by 1/(1-p)), and eval mode draws none."""
    layer = rnnfast.RNN(D, H, dtype=F64, seed=4, recurrent_dropout=0.5)
    x = rng.standard_normal((T, B, D))
    y, _ = layer(x)
    run, cache = layer._cache[1], layer._cache[2]
    m_rec = cache.layers[0][0][0][0].recurrent_mask  # layer 0, direction 0
    assert m_rec.shape == (B, H) and set(np.unique(m_rec)) <= {0.0, 2.0}
    p = layer.state_dict()
    expected, _ = functional.rnn_forward(
        x,
        p["weight_ih_l0"],
        p["weight_hh_l0"],
        p["bias_ih_l0"],
        p["bias_hh_l0"],
        recurrent_mask=m_rec,
    )
    np.testing.assert_allclose(y, expected, rtol=1e-13, atol=1e-13)
    assert run.training
    layer.eval()
    plain, _ = functional.rnn_forward(
        x, p["weight_ih_l0"], p["weight_hh_l0"], p["bias_ih_l0"], p["bias_hh_l0"]
    )
    np.testing.assert_allclose(layer(x)[0], plain, rtol=1e-13, atol=1e-13)


def test_input_dropout_and_token_input():
    """Input dropout needs the embedded sequence: a direct fused call refuses it, Sequential
    does not fuse such a layer."""
    embed = Embedding(5, D, seed=0)
    rnn = rnnfast.RNN(D, H, input_dropout=0.2, seed=1)
    ids = np.random.default_rng(0).integers(0, 5, size=(T, 16))
    with pytest.raises(ValueError, match="input_dropout"):
        rnn(ids, embedding=embed)
    model = Sequential([embed, rnn])
    model(ids)
    assert model._fused == frozenset()
    rnn.eval()
    embed.eval()
    model(ids)
    assert model._fused == frozenset({0})


@pytest.mark.parametrize("name", ["input_dropout", "recurrent_dropout"])
def test_dropout_options_are_checked_and_kept(name, tmp_path):
    with pytest.raises(ValueError, match=name):
        rnnfast.RNN(D, H, **{name: 1.5})
    layer = rnnfast.RNN(D, H, **{name: 0.25})
    with pytest.raises(ValueError, match=name):
        setattr(layer, name, -0.1)
    assert getattr(layer, name) == 0.25
    assert f"{name}=0.25" in repr(layer)
    layer.save(tmp_path / "layer.npz")
    assert getattr(rnnfast.load(tmp_path / "layer.npz"), name) == 0.25


def test_zero_output_for_mask_is_checked():
    with pytest.raises(TypeError, match="zero_output_for_mask"):
        rnnfast.RNN(D, H, zero_output_for_mask=1)


def test_load_keras_maps_the_dropouts(keras, rng):
    kl = _keras_simple_rnn(keras, rng, dropout=0.2, recurrent_dropout=0.3)
    layer = rnnfast.RNN(D, H, batch_first=True)
    interop.load_keras(layer, kl)
    assert (layer.input_dropout, layer.recurrent_dropout) == (
        pytest.approx(0.2),
        pytest.approx(0.3),
    )


def test_summary_names_the_dropouts_as_keras(capsys):
    rnnfast.RNN(D, H, input_dropout=0.1, recurrent_dropout=0.2).summary()
    assert "dropout 0.1, recurrent_dropout 0.2" in capsys.readouterr().out
