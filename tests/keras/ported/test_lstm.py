"""Keras 3's own tests of LSTM (keras/src/layers/rnn/lstm_test.py, Keras 3.15), run on
``rnnfast.keras.LSTM``: the same inputs and the expected values copied from that file (each
test names its Keras function)."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast.keras as rk

from ._port import assert_all_close, assert_stateful, constant_initializers, recurrent_basics

TOL = {"atol": 1e-5, "rtol": 1e-5}  # the Keras tests' own


@pytest.fixture
def C(keras):
    return constant_initializers(keras)


def test_basics(keras):
    # lstm_test.py: LSTMTest.test_basics
    recurrent_basics(
        rk.LSTM,
        dropout_kwargs=[
            {"units": 3, "dropout": 0.5},
            {"units": 3, "dropout": 0.5, "recurrent_dropout": 0.5},
        ],
    )


FORWARD = np.array(
    [
        [0.6288687, 0.6288687, 0.6288687],
        [0.86899155, 0.86899155, 0.86899155],
        [0.9460773, 0.9460773, 0.9460773],
    ]
)


@pytest.mark.parametrize("implementation", [1, 2])
def test_correctness(C, implementation):
    # lstm_test.py: LSTMTest.test_correctness
    sequence = np.arange(72).reshape((3, 6, 4)).astype("float32")

    def lstm(**kwargs):
        return rk.LSTM(3, **C, implementation=implementation, **kwargs)(sequence)

    assert_all_close(lstm(), FORWARD, **TOL)
    assert_all_close(
        lstm(go_backwards=True),
        np.array(
            [
                [0.35622165, 0.35622165, 0.35622165],
                [0.74789524, 0.74789524, 0.74789524],
                [0.8872726, 0.8872726, 0.8872726],
            ]
        ),
        **TOL,
    )
    assert_all_close(lstm(unroll=True), FORWARD, **TOL)
    assert_all_close(
        lstm(unit_forget_bias=False),
        np.array(
            [
                [0.57019705, 0.57019705, 0.57019705],
                [0.8661914, 0.8661914, 0.8661914],
                [0.9459622, 0.9459622, 0.9459622],
            ]
        ),
        **TOL,
    )
    assert_all_close(
        lstm(use_bias=False),
        np.array(
            [
                [0.54986924, 0.54986924, 0.54986924],
                [0.86226785, 0.86226785, 0.86226785],
                [0.9443936, 0.9443936, 0.9443936],
            ]
        ),
        **TOL,
    )


def test_statefulness(C):
    # lstm_test.py: LSTMTest.test_statefulness
    sequence = np.arange(24).reshape((2, 3, 4)).astype("float32")
    expected = np.array(
        [
            [0.3124785, 0.3124785, 0.3124785, 0.3124785],
            [0.6863672, 0.6863672, 0.6863672, 0.6863672],
        ]
    )
    layer = rk.LSTM(4, stateful=True, **C)
    assert_stateful(layer, sequence, expected, **TOL)


def test_pass_initial_state(C):
    # lstm_test.py: LSTMTest.test_pass_initial_state
    sequence = np.arange(24).reshape((2, 4, 3)).astype("float32")
    initial_state = [
        np.arange(4).reshape((2, 2)).astype("float32"),
        np.arange(4).reshape((2, 2)).astype("float32"),
    ]
    output = rk.LSTM(2, **C)(sequence, initial_state=initial_state)
    assert_all_close(output, np.array([[0.20574439, 0.3558822], [0.64930826, 0.66276]]), **TOL)
    output = rk.LSTM(2, **C, go_backwards=True)(sequence, initial_state=initial_state)
    assert_all_close(output, np.array([[0.13281618, 0.2790356], [0.5839337, 0.5992567]]), **TOL)


def test_masking(C):
    # lstm_test.py: LSTMTest.test_masking
    sequence = np.arange(24).reshape((2, 4, 3)).astype("float32")
    mask = np.array([[True, True, True, False], [True, True, False, False]])
    output = rk.LSTM(2, **C, unroll=True)(sequence, mask=mask)
    assert_all_close(output, np.array([[0.11755939, 0.11755939], [0.28556206, 0.28556206]]), **TOL)

    output = rk.LSTM(2, **C, return_sequences=True)(sequence, mask=mask)
    assert_all_close(
        output[0],
        np.array(
            [
                [0.01588910, 0.01588910],
                [0.05552048, 0.05552048],
                [0.11755939, 0.11755939],
                [0.11755939, 0.11755939],
            ]
        ),
        **TOL,
    )
    assert_all_close(
        output[1],
        np.array(
            [
                [0.14185596, 0.14185596],
                [0.28556206, 0.28556206],
                [0.28556206, 0.28556206],
                [0.28556206, 0.28556206],
            ]
        ),
        **TOL,
    )

    layer = rk.LSTM(2, **C, return_sequences=True, zero_output_for_mask=True)
    output = layer(sequence, mask=mask)
    assert_all_close(
        output[0],
        np.array(
            [
                [0.01588910, 0.01588910],
                [0.05552048, 0.05552048],
                [0.11755939, 0.11755939],
                [0.0, 0.0],
            ]
        ),
        **TOL,
    )
    assert_all_close(
        output[1],
        np.array(
            [
                [0.14185596, 0.14185596],
                [0.28556206, 0.28556206],
                [0.0, 0.0],
                [0.0, 0.0],
            ]
        ),
        **TOL,
    )

    backwards_mask = np.array([[False, True, True, True], [False, False, True, True]])
    output = rk.LSTM(2, **C, go_backwards=True)(sequence, mask=backwards_mask)
    assert_all_close(output, np.array([[0.15341201, 0.15341201], [0.3844719, 0.3844719]]), **TOL)
