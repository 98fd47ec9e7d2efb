"""Keras 3's own tests of Bidirectional (keras/src/layers/rnn/bidirectional_test.py, Keras
3.15), run on ``rnnfast.keras.Bidirectional``: the same inputs and the expected values copied
from that file (each test names its Keras function)."""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast.keras as rk

from ._port import assert_all_close, assert_stateful, constant_initializers, layer_test

TOL = {"atol": 1e-5, "rtol": 1e-5}  # the Keras tests' own


@pytest.fixture
def C(keras):
    return constant_initializers(keras)


def test_basics():
    # bidirectional_test.py: SimpleRNNTest.test_basics
    layer_test(
        lambda **kw: rk.Bidirectional(rk.SimpleRNN(4), **kw),
        init_kwargs={},
        input_shape=(3, 2, 4),
        expected_output_shape=(3, 8),
        expected_num_trainable_weights=6,
        expected_num_non_trainable_weights=0,
        supports_masking=True,
    )
    layer_test(
        lambda **kw: rk.Bidirectional(
            rk.SimpleRNN(4), backward_layer=rk.SimpleRNN(4, go_backwards=True), **kw
        ),
        init_kwargs={"merge_mode": "sum"},
        input_shape=(3, 2, 4),
        expected_output_shape=(3, 4),
        expected_num_trainable_weights=6,
        expected_num_non_trainable_weights=0,
        supports_masking=True,
    )


def test_correctness(keras, C):
    # bidirectional_test.py: SimpleRNNTest.test_correctness
    sequence = np.arange(24).reshape((2, 3, 4)).astype("float32")
    forward_layer = rk.SimpleRNN(2, **C)
    output = rk.Bidirectional(layer=forward_layer)(sequence)
    assert_all_close(
        output,
        np.array(
            [
                [0.39687276, 0.39687276, 0.10004295, 0.10004295],
                [0.7237238, 0.7237238, 0.53391594, 0.53391594],
            ]
        ),
        **TOL,
    )
    output = rk.Bidirectional(layer=forward_layer, merge_mode="ave")(sequence)
    assert_all_close(output, np.array([[0.24845785, 0.24845785], [0.6288199, 0.6288199]]), **TOL)

    output1, output2 = rk.Bidirectional(layer=forward_layer, merge_mode=None)(sequence)
    assert_all_close(output1, np.array([[0.39687276, 0.39687276], [0.7237238, 0.7237238]]), **TOL)
    assert_all_close(output2, np.array([[0.10004295, 0.10004295], [0.53391594, 0.53391594]]), **TOL)

    backward_layer = rk.SimpleRNN(
        2, **constant_initializers(keras, 0.03, 0.02, 0.01), go_backwards=True
    )
    layer = rk.Bidirectional(layer=forward_layer, backward_layer=backward_layer, merge_mode="mul")
    output = layer(sequence)
    assert_all_close(output, np.array([[0.08374989, 0.08374989], [0.6740834, 0.6740834]]), **TOL)

    forward_layer = rk.GRU(2, **C, return_sequences=True)
    output = rk.Bidirectional(layer=forward_layer, merge_mode="sum")(sequence)
    assert_all_close(
        output,
        np.array(
            [
                [
                    [0.20937867, 0.20937867],
                    [0.34462988, 0.34462988],
                    [0.40290534, 0.40290534],
                ],
                [
                    [0.59829646, 0.59829646],
                    [0.6734641, 0.6734641],
                    [0.6479671, 0.6479671],
                ],
            ]
        ),
        **TOL,
    )


def test_statefulness(C):
    # bidirectional_test.py: SimpleRNNTest.test_statefulness
    sequence = np.arange(24).reshape((2, 4, 3)).astype("float32")
    expected = np.array(
        [
            [0.26234663, 0.26234663, 0.16959146, 0.16959146],
            [0.6137073, 0.6137073, 0.5381646, 0.5381646],
        ]
    )
    layer = rk.Bidirectional(layer=rk.LSTM(2, **C, stateful=True))
    assert_stateful(layer, sequence, expected, **TOL)


def test_pass_initial_state(C):
    # bidirectional_test.py: SimpleRNNTest.test_pass_initial_state
    sequence = np.arange(24).reshape((2, 4, 3)).astype("float32")
    initial_state = [np.arange(4).reshape((2, 2)).astype("float32") * k for k in (1, 2, 3, 4)]
    layer = rk.Bidirectional(layer=rk.LSTM(2, **C))
    output = layer(sequence, initial_state=initial_state)
    assert_all_close(
        output,
        np.array(
            [
                [0.20794602, 0.4577124, 0.14046375, 0.48191673],
                [0.6682636, 0.6711909, 0.60943645, 0.60950446],
            ]
        ),
        **TOL,
    )


def test_masking(C):
    # bidirectional_test.py: SimpleRNNTest.test_masking
    sequence = np.arange(24).reshape((2, 4, 3)).astype("float32")
    layer = rk.Bidirectional(layer=rk.GRU(2, **C))
    mask = np.array([[True, True, False, True], [True, False, False, True]])
    output = layer(sequence, mask=mask)
    assert_all_close(
        output,
        np.array(
            [
                [0.19393763, 0.19393763, 0.11669192, 0.11669192],
                [0.30818558, 0.30818558, 0.28380975, 0.28380975],
            ]
        ),
        **TOL,
    )


def test_return_state(C):
    # bidirectional_test.py: SimpleRNNTest.test_return_state
    sequence = np.arange(24).reshape((2, 4, 3)).astype("float32")
    layer = rk.Bidirectional(layer=rk.LSTM(2, **C, return_state=True))
    output, h1, c1, h2, c2 = layer(sequence)
    assert_all_close(
        output,
        np.array(
            [
                [0.1990008, 0.1990008, 0.12659755, 0.12659755],
                [0.52335435, 0.52335435, 0.44717982, 0.44717982],
            ]
        ),
        **TOL,
    )
    assert_all_close(h1, np.array([[0.1990008, 0.1990008], [0.52335435, 0.52335435]]), **TOL)
    assert_all_close(c1, np.array([[0.35567185, 0.35567185], [1.0492687, 1.0492687]]), **TOL)
    assert_all_close(h2, np.array([[0.12659755, 0.12659755], [0.44717982, 0.44717982]]), **TOL)
    assert_all_close(c2, np.array([[0.2501858, 0.2501858], [0.941473, 0.941473]]), **TOL)


def test_output_shape():
    # bidirectional_test.py: SimpleRNNTest.test_output_shape
    x = np.array([[[101, 202], [303, 404]]])
    for merge_mode in ["ave", "concat", "mul", "sum", None]:
        layer = rk.Bidirectional(rk.LSTM(2, return_state=True), merge_mode=merge_mode)
        output = layer(x)
        output_shape = layer.compute_output_shape(x.shape)
        assert len(output) == len(output_shape)
        for out, shape in zip(output, output_shape):
            assert out.shape == shape

    for merge_mode in ["concat", "ave", "mul", "sum"]:
        layer = rk.Bidirectional(rk.LSTM(2, return_state=False), merge_mode=merge_mode)
        output = layer(x)
        assert output.shape == layer.compute_output_shape(x.shape)

    # return_state=False & merge_mode=None
    layer = rk.Bidirectional(rk.LSTM(2, return_state=False), merge_mode=None)
    output = layer(x)
    output_shape = layer.compute_output_shape(x.shape)
    assert len(output) == len(output_shape) == 2
    for out, shape in zip(output, output_shape):
        assert out.shape == shape


def test_keeps_use_cudnn():
    # bidirectional_test.py: SimpleRNNTest.test_keeps_use_cudnn: the front keeps use_cudnn
    # "auto" and False; True (NVIDIA's cuDNN, which a CPU library has not) is refused by name
    for rnn_class in [rk.GRU, rk.LSTM]:
        for use_cudnn in [False, "auto"]:
            bidi = rk.Bidirectional(rnn_class(1, use_cudnn=use_cudnn))
            assert bidi.forward_layer.use_cudnn == use_cudnn
            assert bidi.backward_layer.use_cudnn == use_cudnn
        with pytest.raises(ValueError, match="use_cudnn"):
            rnn_class(1, use_cudnn=True)

    # otherwise ignore it
    bidi = rk.Bidirectional(rk.SimpleRNN(1))
    assert not hasattr(bidi.forward_layer, "use_cudnn")
    assert not hasattr(bidi.backward_layer, "use_cudnn")


def _matches_unfused(keras, cls):
    # the two layers differ only in use_cudnn; the weights of one are copied into the other
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 6, 4)).astype("float32")

    def build(use_cudnn):
        layer = rk.Bidirectional(
            cls(
                5,
                use_cudnn=use_cudnn,
                return_sequences=True,
                kernel_initializer=keras.initializers.GlorotUniform(seed=1),
                recurrent_initializer=keras.initializers.Orthogonal(seed=2),
            )
        )
        layer.build(x.shape)
        return layer

    ref = build(use_cudnn=False)
    fused = build(use_cudnn="auto")
    fused.set_weights(ref.get_weights())
    assert_all_close(ref(x), fused(x), atol=1e-5)


def test_fused_lstm_matches_unfused(keras):
    # bidirectional_test.py: SimpleRNNTest.test_fused_lstm_matches_unfused (Keras's
    # ``for rv, fv in zip(ref.weights, fused.weights): fv.assign(rv.value)`` is set_weights)
    _matches_unfused(keras, rk.LSTM)


def test_fused_gru_matches_unfused(keras):
    # bidirectional_test.py: SimpleRNNTest.test_fused_gru_matches_unfused
    _matches_unfused(keras, rk.GRU)


# Not applicable (counted in __init__.py): test_fused_lstm_eligibility and
# test_fused_gru_eligibility call Keras's private _can_attempt_fused_lstm / _gru (its cuDNN
# dispatch); test_torch_cudnn_bidirectional_gru_dispatch_fires spies on torch._VF.gru on CUDA.
