"""Keras 3's own tests of GRU (keras/src/layers/rnn/gru_test.py, Keras 3.15), run on
``rnnfast.keras.GRU``: the same inputs and the expected values copied from that file (each test
names its Keras function)."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast.keras as rk

from ._port import assert_all_close, assert_stateful, constant_initializers, recurrent_basics


@pytest.fixture
def C(keras):
    return constant_initializers(keras)


def test_basics(keras):
    # gru_test.py: GRUTest.test_basics
    recurrent_basics(
        rk.GRU,
        dropout_kwargs=[
            {"units": 3, "dropout": 0.5},
            {"units": 3, "dropout": 0.5, "recurrent_dropout": 0.5},
        ],
    )


FORWARD = np.array(
    [
        [0.5217289, 0.5217289, 0.5217289],
        [0.6371659, 0.6371659, 0.6371659],
        [0.39384964, 0.39384964, 0.3938496],
    ]
)


@pytest.mark.parametrize("implementation", [1, 2])
def test_correctness(C, implementation):
    # gru_test.py: GRUTest.test_correctness (parameterized over implementation, which that
    # test does not pass to the layer; the port passes it, which changes nothing)
    sequence = np.arange(72).reshape((3, 6, 4)).astype("float32")
    tol = {"atol": 1e-5, "rtol": 1e-5}

    def gru(**kwargs):
        return rk.GRU(3, **C, implementation=implementation, **kwargs)(sequence)

    assert_all_close(gru(), FORWARD, **tol)
    assert_all_close(
        gru(go_backwards=True),
        np.array(
            [
                [0.24406259, 0.24406259, 0.24406259],
                [0.611516, 0.611516, 0.611516],
                [0.3928808, 0.3928808, 0.3928808],
            ]
        ),
        **tol,
    )
    assert_all_close(gru(unroll=True), FORWARD, **tol)
    assert_all_close(
        gru(reset_after=False),
        np.array(
            [
                [0.51447755, 0.51447755, 0.51447755],
                [0.6426879, 0.6426879, 0.6426879],
                [0.40208298, 0.40208298, 0.40208298],
            ]
        ),
        **tol,
    )
    assert_all_close(
        gru(use_bias=False),
        np.array(
            [
                [0.49988455, 0.49988455, 0.49988455],
                [0.64701194, 0.64701194, 0.64701194],
                [0.4103359, 0.4103359, 0.4103359],
            ]
        ),
        **tol,
    )


def test_statefulness(C):
    # gru_test.py: GRUTest.test_statefulness
    sequence = np.arange(24).reshape((2, 3, 4)).astype("float32")
    expected = np.array(
        [
            [0.29542392, 0.29542392, 0.29542392, 0.29542392],
            [0.5885018, 0.5885018, 0.5885018, 0.5885018],
        ]
    )
    layer = rk.GRU(4, stateful=True, **C)
    assert_stateful(layer, sequence, expected)


INITIAL_FORWARD = np.array([[0.23774096, 0.33508456], [0.83659905, 1.0227708]])
INITIAL_BACKWARD = np.array([[0.13486053, 0.23261218], [0.78257304, 0.9691353]])


def test_pass_initial_state(C):
    # gru_test.py: GRUTest.test_pass_initial_state
    sequence = np.arange(24).reshape((2, 4, 3)).astype("float32")
    initial_state = np.arange(4).reshape((2, 2)).astype("float32")
    output = rk.GRU(2, **C)(sequence, initial_state=initial_state)
    assert_all_close(output, INITIAL_FORWARD)
    output = rk.GRU(2, **C, go_backwards=True)(sequence, initial_state=initial_state)
    assert_all_close(output, INITIAL_BACKWARD)


def test_pass_return_state(C):
    # gru_test.py: GRUTest.test_pass_return_state
    sequence = np.arange(24).reshape((2, 4, 3)).astype("float32")
    initial_state = np.arange(4).reshape((2, 2)).astype("float32")
    layer = rk.GRU(2, **C, return_state=True)
    output, state = layer(sequence, initial_state=initial_state)
    assert_all_close(output, INITIAL_FORWARD)
    assert_all_close(output, state)
    layer = rk.GRU(2, **C, return_state=True, go_backwards=True)
    output, state = layer(sequence, initial_state=initial_state)
    assert_all_close(output, INITIAL_BACKWARD)
    assert_all_close(output, state)


def test_masking(C):
    # gru_test.py: GRUTest.test_masking
    sequence = np.arange(24).reshape((2, 4, 3)).astype("float32")
    mask = np.array([[True, True, False, True], [True, False, False, True]])
    output = rk.GRU(2, **C, unroll=True)(sequence, mask=mask)
    assert_all_close(output, np.array([[0.19393763, 0.19393763], [0.30818558, 0.30818558]]))

    output = rk.GRU(2, **C, return_sequences=True)(sequence, mask=mask)
    assert_all_close(
        output[0],
        np.array(
            [
                [0.03606692, 0.03606692],
                [0.09497581, 0.09497581],
                [0.09497581, 0.09497581],
                [0.19393763, 0.19393763],
            ]
        ),
    )
    assert_all_close(
        output[1],
        np.array(
            [
                [0.16051409, 0.16051409],
                [0.16051409, 0.16051409],
                [0.16051409, 0.16051409],
                [0.30818558, 0.30818558],
            ]
        ),
    )

    layer = rk.GRU(2, **C, return_sequences=True, zero_output_for_mask=True)
    output = layer(sequence, mask=mask)
    assert_all_close(
        output[0],
        np.array(
            [
                [0.03606692, 0.03606692],
                [0.09497581, 0.09497581],
                [0.0, 0.0],
                [0.19393763, 0.19393763],
            ]
        ),
    )
    assert_all_close(
        output[1],
        np.array(
            [
                [0.16051409, 0.16051409],
                [0.0, 0.0],
                [0.0, 0.0],
                [0.30818558, 0.30818558],
            ]
        ),
    )

    output = rk.GRU(2, **C, go_backwards=True)(sequence, mask=mask)
    assert_all_close(output, np.array([[0.11669192, 0.11669192], [0.28380975, 0.28380975]]))


def test_legacy_implementation_argument(C):
    # gru_test.py: GRUTest.test_legacy_implementation_argument: Keras's legacy
    # implementation=0, given through a config (the front takes it as an argument too)
    sequence = np.arange(72).reshape((3, 6, 4)).astype("float32")
    layer = rk.GRU(3, **C)
    config = layer.get_config()
    config["implementation"] = 0  # Add legacy argument
    layer = rk.GRU.from_config(config)
    assert layer.implementation == 0
    assert_all_close(layer(sequence), FORWARD)


def test_stateful_with_symbolic_batch_size():
    # gru_test.py: GRUTest.test_stateful_with_symbolic_batch_size. Keras runs it on the
    # TensorFlow backend only (a tf.function with a symbolic batch size); its eager half
    # applies: a stateful GRU called on data in training mode builds for that batch
    layer = rk.GRU(5, stateful=True)
    x_concrete = np.ones((2, 10, 10), dtype=np.float32)
    _ = layer(x_concrete, training=True)
    y = layer(x_concrete, training=True)
    assert y.shape == (2, 5)


# gru_test.py: GRUTest.test_torch_cudnn_dispatch_fires does not apply: it spies on
# torch._VF.gru on a CUDA device (skipped by Keras without one); rnnfast runs on the CPU,
# and use_cudnn=True is refused (test_bidirectional.py: test_keeps_use_cudnn)
