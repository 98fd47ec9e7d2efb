"""Keras 3's own tests of SimpleRNN (keras/src/layers/rnn/simple_rnn_test.py, Keras 3.15), run
on ``rnnfast.keras.SimpleRNN``: the same inputs and the expected values copied from that file
(each test names its Keras function)."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast.keras as rk

from ._port import assert_all_close, assert_stateful, constant_initializers, recurrent_basics


@pytest.fixture
def C(keras):
    return constant_initializers(keras)


def test_basics(keras):
    # simple_rnn_test.py: SimpleRNNTest.test_basics (Keras's expected_num_non_trainable_
    # variables=1 counts its dropout SeedGenerator, an internal the front does not have)
    recurrent_basics(
        rk.SimpleRNN,
        dropout_kwargs=[{"units": 3, "dropout": 0.5, "recurrent_dropout": 0.5}],
    )


def test_correctness(C):
    # simple_rnn_test.py: SimpleRNNTest.test_correctness
    sequence = np.arange(24).reshape((2, 3, 4)).astype("float32")
    forward = np.array(
        [
            [0.405432, 0.405432, 0.405432, 0.405432],
            [0.73605347, 0.73605347, 0.73605347, 0.73605347],
        ]
    )
    backward = np.array(
        [
            [0.11144729, 0.11144729, 0.11144729, 0.11144729],
            [0.5528889, 0.5528889, 0.5528889, 0.5528889],
        ]
    )
    assert_all_close(rk.SimpleRNN(4, **C)(sequence), forward)
    assert_all_close(rk.SimpleRNN(4, **C, unroll=True)(sequence), forward)
    assert_all_close(rk.SimpleRNN(4, **C, go_backwards=True)(sequence), backward)
    assert_all_close(rk.SimpleRNN(4, **C, go_backwards=True, unroll=True)(sequence), backward)


def test_statefulness(C):
    # simple_rnn_test.py: SimpleRNNTest.test_statefulness
    sequence = np.arange(24).reshape((2, 3, 4)).astype("float32")
    expected = np.array(
        [
            [0.40559256, 0.40559256, 0.40559256, 0.40559256],
            [0.7361247, 0.7361247, 0.7361247, 0.7361247],
        ]
    )
    layer = rk.SimpleRNN(4, stateful=True, **C)
    assert_stateful(layer, sequence, expected)


def test_pass_initial_state(C):
    # simple_rnn_test.py: SimpleRNNTest.test_pass_initial_state
    sequence = np.arange(24).reshape((2, 4, 3)).astype("float32")
    initial_state = np.arange(8).reshape((2, 4)).astype("float32")
    output = rk.SimpleRNN(4, **C)(sequence, initial_state=initial_state)
    assert_all_close(
        output,
        np.array(
            [
                [0.33621645, 0.33621645, 0.33621645, 0.33621645],
                [0.6262637, 0.6262637, 0.6262637, 0.6262637],
            ]
        ),
    )
    output = rk.SimpleRNN(4, **C, go_backwards=True)(sequence, initial_state=initial_state)
    assert_all_close(
        output,
        np.array(
            [
                [0.07344437, 0.07344437, 0.07344437, 0.07344437],
                [0.43043602, 0.43043602, 0.43043602, 0.43043602],
            ]
        ),
    )


def test_masking(C):
    # simple_rnn_test.py: SimpleRNNTest.test_masking
    sequence = np.arange(24).reshape((2, 4, 3)).astype("float32")
    mask = np.array([[True, True, False, True], [True, False, False, True]])
    output = rk.SimpleRNN(4, **C, unroll=True)(sequence, mask=mask)
    assert_all_close(
        output,
        np.array(
            [
                [0.32951632, 0.32951632, 0.32951632, 0.32951632],
                [0.61799484, 0.61799484, 0.61799484, 0.61799484],
            ]
        ),
    )

    output = rk.SimpleRNN(2, **C, return_sequences=True)(sequence, mask=mask)
    assert_all_close(
        output[0],
        np.array(
            [
                [0.0599281, 0.0599281],
                [0.15122814, 0.15122814],
                [0.15122814, 0.15122814],
                [0.32394567, 0.32394567],
            ]
        ),
    )
    assert_all_close(
        output[1],
        np.array(
            [
                [0.3969304, 0.3969304],
                [0.3969304, 0.3969304],
                [0.3969304, 0.3969304],
                [0.608085, 0.608085],
            ]
        ),
    )

    layer = rk.SimpleRNN(2, **C, return_sequences=True, zero_output_for_mask=True)
    output = layer(sequence, mask=mask)
    assert_all_close(
        output[0],
        np.array(
            [
                [0.0599281, 0.0599281],
                [0.15122814, 0.15122814],
                [0.0, 0.0],
                [0.32394567, 0.32394567],
            ]
        ),
    )
    assert_all_close(
        output[1],
        np.array(
            [
                [0.3969304, 0.3969304],
                [0.0, 0.0],
                [0.0, 0.0],
                [0.608085, 0.608085],
            ]
        ),
    )

    output = rk.SimpleRNN(4, **C, go_backwards=True)(sequence, mask=mask)
    assert_all_close(
        output,
        np.array(
            [
                [0.07376196, 0.07376196, 0.07376196, 0.07376196],
                [0.43645123, 0.43645123, 0.43645123, 0.43645123],
            ]
        ),
    )
