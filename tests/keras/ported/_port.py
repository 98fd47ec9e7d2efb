"""What the ported Keras tests share: Keras's ``assertAllClose`` (its default tolerances,
atol = rtol = 1e-6, or the test's own), the ``Constant`` initializers that nearly every Keras RNN
test builds its layers with, ``layer_test``, the part of Keras's ``run_layer_test`` that
applies to the front, and the bodies the recurrent layers' tests repeat (``recurrent_basics``,
``assert_stateful``)."""

from __future__ import annotations

import numpy as np
import pytest

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


def recurrent_basics(layer_cls, dropout_kwargs):
    """The ``test_basics`` that simple_rnn_test.py, gru_test.py and lstm_test.py share, with
    their values: ``run_layer_test`` on (3, 2, 4) inputs of a 3-unit layer (3 weights) for each
    of the test's ``dropout_kwargs`` (in training mode: output (3, 3)), then returning
    sequences (output (3, 2, 3)); last, the regularizers of its ``expected_num_losses=3`` part,
    which the front refuses, naming the argument."""
    for init_kwargs in dropout_kwargs:
        layer_test(
            layer_cls,
            init_kwargs=init_kwargs,
            input_shape=(3, 2, 4),
            call_kwargs={"training": True},
            expected_output_shape=(3, 3),
            expected_num_trainable_weights=3,
            expected_num_non_trainable_weights=0,
            supports_masking=True,
        )
    layer_test(
        layer_cls,
        init_kwargs={"units": 3, "return_sequences": True},
        input_shape=(3, 2, 4),
        expected_output_shape=(3, 2, 3),
        expected_num_trainable_weights=3,
        expected_num_non_trainable_weights=0,
        supports_masking=True,
    )
    for key, value in (
        ("bias_regularizer", "l1"),
        ("kernel_regularizer", "l2"),
        ("recurrent_regularizer", "l2"),
    ):
        with pytest.raises(NotImplementedError, match=key):
            layer_cls(units=3, return_sequences=True, **{key: value})


def assert_stateful(layer, sequence, expected, **tol):
    """The Keras RNN tests' ``test_statefulness``: a stateful ``layer``'s second call on
    ``sequence`` starts from the first's final state and gives ``expected``; the same after
    ``reset_state()``."""
    layer(sequence)
    assert_all_close(layer(sequence), expected, **tol)
    layer.reset_state()
    layer(sequence)
    assert_all_close(layer(sequence), expected, **tol)
