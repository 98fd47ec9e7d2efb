"""Keras 3's own tests of TimeDistributed (keras/src/layers/rnn/time_distributed_test.py,
Keras 3.15), run on ``rnnfast.keras.TimeDistributed``: the same inputs and the expected values
copied from that file (each test names its Keras function)."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast.keras as rk

from ._port import assert_all_close, layer_test

MASK_ERROR = r"The `mask` passed to the `TimeDistributed` layer has a shape.*"


def test_basics():
    # time_distributed_test.py: TimeDistributedTest.test_basics
    layer_test(
        lambda **kw: rk.TimeDistributed(rk.Dense(1, use_bias=False), **kw),
        init_kwargs={},
        input_shape=(3, 2, 4),
        expected_output_shape=(3, 2, 1),
        expected_num_trainable_weights=1,
        expected_num_non_trainable_weights=0,
        supports_masking=True,
    )


def test_build(keras):
    # time_distributed_test.py: TimeDistributedTest.test_build: TimeDistributed(Conv2D) on
    # frames; the front has no convolutions, and refuses a Keras layer inside it by name
    inputs = rk.Input(shape=(10, 128, 128, 3), batch_size=32)
    with pytest.raises(TypeError, match="layer: expected a Dense or Dropout of rnnfast.keras"):
        rk.TimeDistributed(keras.layers.Conv2D(64, (3, 3)))(inputs)


def test_correctness(keras):
    # time_distributed_test.py: TimeDistributedTest.test_correctness
    sequence = np.arange(24).reshape((3, 2, 4)).astype("float32")
    layer = rk.Dense(1, kernel_initializer=keras.initializers.Constant(0.01), use_bias=False)
    output = rk.TimeDistributed(layer=layer)(sequence)
    assert_all_close(output, np.array([[[0.06], [0.22]], [[0.38], [0.53999996]], [[0.7], [0.86]]]))


def test_masking(keras):
    # time_distributed_test.py: TimeDistributedTest.test_masking: a user's keras.layers.Wrapper
    # that reads the mask; a Keras layer inside the front's TimeDistributed is refused by name
    class MaskedDense(keras.layers.Wrapper):
        def __init__(self, units, **kwargs):
            layer = keras.layers.Dense(
                units, kernel_initializer=keras.initializers.Constant(0.01), use_bias=False
            )
            super().__init__(layer, **kwargs)
            self.supports_masking = True

    with pytest.raises(TypeError, match="layer: expected a Dense or Dropout of rnnfast.keras"):
        rk.TimeDistributed(layer=MaskedDense(1))


def test_with_mask_zero():
    # time_distributed_test.py: TimeDistributedTest.test_with_mask_zero (float ids, cast to
    # ints as Keras's Embedding casts them; the last batch smaller)
    model = rk.Sequential(
        [
            rk.Input(shape=(20,)),
            rk.Embedding(input_dim=10, output_dim=5, mask_zero=True),
            rk.TimeDistributed(rk.Dense(units=5, activation="softmax")),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    rng = np.random.default_rng(0)
    X_train = rng.uniform(1, 10, size=(22, 20))
    Y_train = rng.integers(1, 2, size=(22, 20))
    model.fit(X_train, Y_train, epochs=1, batch_size=16, verbose=0)


def _td():
    return rk.TimeDistributed(rk.Dense(units=5, activation="softmax"))


def test_mask_validation_with_mismatched_timesteps():
    # time_distributed_test.py: TimeDistributedTest.test_mask_validation_with_mismatched_timesteps
    batch, timesteps, features = 4, 5, 3
    td = _td()
    inputs = np.zeros((batch, timesteps, features))
    output = td(inputs, mask=np.ones((batch, timesteps), dtype=bool))
    assert output.shape == (batch, timesteps, 5)
    with pytest.raises(ValueError, match=MASK_ERROR):
        td(inputs, mask=np.ones((batch, timesteps + 1), dtype=bool))


def test_mask_validation_with_mismatched_batch_size():
    # time_distributed_test.py: TimeDistributedTest.test_mask_validation_with_mismatched_batch_size
    batch, timesteps, features = 4, 5, 3
    td = _td()
    inputs = np.zeros((batch, timesteps, features))
    with pytest.raises(ValueError, match=MASK_ERROR):
        td(inputs, mask=np.ones((batch + 1, timesteps), dtype=bool))


def test_mask_validation_with_correct_shape():
    # time_distributed_test.py: TimeDistributedTest.test_mask_validation_with_correct_shape
    batch, timesteps, features = 4, 5, 3
    td = _td()
    inputs = np.zeros((batch, timesteps, features))
    output = td(inputs, mask=np.ones((batch, timesteps, 1), dtype=bool))
    assert output.shape == (batch, timesteps, 5)


def test_mask_validation_with_3d_mask():
    # time_distributed_test.py: TimeDistributedTest.test_mask_validation_with_3d_mask
    batch, timesteps, features = 4, 5, 3
    td = _td()
    inputs = np.zeros((batch, timesteps, features))
    output = td(inputs, mask=np.ones((batch, timesteps, 2), dtype=bool))
    assert output.shape == (batch, timesteps, 5)
    with pytest.raises(ValueError, match=MASK_ERROR):
        td(inputs, mask=np.ones((batch, timesteps + 1, 2), dtype=bool))


def test_mask_validation_with_none_mask():
    # time_distributed_test.py: TimeDistributedTest.test_mask_validation_with_none_mask
    batch, timesteps, features = 4, 5, 3
    td = _td()
    output = td(np.zeros((batch, timesteps, features)), mask=None)
    assert output.shape == (batch, timesteps, 5)


def test_mask_validation_with_both_batch_and_timesteps_mismatched():
    # time_distributed_test.py: TimeDistributedTest.
    # test_mask_validation_with_both_batch_and_timesteps_mismatched
    batch, timesteps, features = 4, 5, 3
    td = _td()
    inputs = np.zeros((batch, timesteps, features))
    with pytest.raises(ValueError, match=MASK_ERROR):
        td(inputs, mask=np.ones((batch + 1, timesteps + 1), dtype=bool))
