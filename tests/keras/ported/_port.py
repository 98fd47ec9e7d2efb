"""What the ported Keras tests share: Keras's ``assertAllClose`` (its default tolerances,
atol = rtol = 1e-6, or the test's own), the ``Constant`` initializers that nearly every Keras RNN
test builds its layers with, and ``layer_test``, the part of Keras's ``run_layer_test`` that
applies to the front."""

from __future__ import annotations

import numpy as np

import rnnfast.keras as rk


def assert_all_close(actual, expected, atol=1e-6, rtol=1e-6):
    """keras.src.testing.TestCase.assertAllClose: same shape, |a - e| <= atol + rtol |e|."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    np.testing.assert_allclose(actual, expected, atol=atol, rtol=rtol)


def constant_initializers(keras, kernel=0.01, recurrent=0.02, bias=0.03):
    """``kernel_initializer=initializers.Constant(0.01)``, ... as the Keras tests write them
    (Keras's own initializer objects, which the front reads)."""
    c = keras.initializers.Constant
    return {
        "kernel_initializer": c(kernel),
        "recurrent_initializer": c(recurrent),
        "bias_initializer": c(bias),
    }


def _shapes(value):
    return [np.shape(v) for v in value] if isinstance(value, (list, tuple)) else [np.shape(value)]


def layer_test(
    layer_cls,
    init_kwargs,
    input_shape,
    expected_output_shape,
    expected_num_trainable_weights,
    expected_num_non_trainable_weights=0,
    call_kwargs=None,
    supports_masking=None,
    train=True,
):
    """Keras's ``run_layer_test`` where it applies to the front: the eager call's output shape,
    the number of weights (Keras's trainable_weights / non_trainable_weights: ``get_weights``
    of a trainable layer), ``supports_masking``, the symbolic call's output shape, and a
    training step of a model holding the layer (Keras's run_training_step)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(input_shape).astype(np.float32)
    layer = layer_cls(**init_kwargs)
    out = layer(x, **(call_kwargs or {}))
    assert _shapes(out) == _shapes(np.zeros(expected_output_shape))
    assert layer.built
    trainable = len(layer.get_weights()) if layer.trainable else 0
    assert trainable == expected_num_trainable_weights
    assert len(layer.get_weights()) - trainable == expected_num_non_trainable_weights
    if supports_masking is not None:
        assert layer.supports_masking is supports_masking
    # symbolic call (Keras: the output of a call on a KerasTensor)
    layer = layer_cls(**init_kwargs)
    inputs = rk.Input(shape=input_shape[1:], batch_size=input_shape[0])
    outputs = layer(inputs)
    assert outputs.shape == tuple(expected_output_shape)
    if train:
        model = rk.Model(inputs, outputs)
        model.compile(optimizer="sgd", loss="mse")
        y = rng.standard_normal(expected_output_shape).astype(np.float32)
        model.fit(x, y, epochs=1, batch_size=input_shape[0], verbose=0)
