"""One exception policy and one message, through the public API of every module that reads
arguments (layers, optimizers, data utilities, masks, the functional core).

The policy: a value of the wrong type is a TypeError (``8.0`` or ``"3"`` where an int goes,
``"False"`` or ``1`` for a flag, a float64 array for a float32 layer), a value of the right type
but not allowed is a ValueError (``0`` for a size, a probability above 1: torch's type for
dropout). Every message reads ``{name}: expected {what}, got {value!r} ({type})``.
"""

from __future__ import annotations

import numpy as np
import pytest

import rnnfast
from rnnfast import data, optim
from rnnfast import functional as F

T, B, D, H = 4, 2, 3, 5


def _param():
    return [(np.zeros(3), np.zeros(3))]


def _sgd():
    return optim.SGD(_param(), lr=0.1)


def _forward(**options):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    w_ih = rng.standard_normal((H, D)).astype(np.float32)
    w_hh = rng.standard_normal((H, H)).astype(np.float32)
    return F.rnn_forward(x, w_ih, w_hh, **options)


# (label, call, exception, argument, expected, what came as shown)
CASES = [
    # ---- an int given as a float, a str or a bool: TypeError --------------------------------
    ("RNN-float", lambda: rnnfast.RNN(D, 8.0), TypeError, "hidden_size", "an int", "8.0 (float)"),
    ("RNN-str", lambda: rnnfast.RNN("3", H), TypeError, "input_size", "an int", "'3' (str)"),
    (
        "RNN-bool",
        lambda: rnnfast.RNN(D, H, num_layers=True),
        TypeError,
        "num_layers",
        "an int",
        "True (bool)",
    ),
    (
        "Linear-float",
        lambda: rnnfast.Linear(D, 3.0),
        TypeError,
        "out_features",
        "an int",
        "3.0 (float)",
    ),
    (
        "Embedding-bool",
        lambda: rnnfast.Embedding(True, D),
        TypeError,
        "num_embeddings",
        "an int",
        "True (bool)",
    ),
    (
        "StepLR-float",
        lambda: optim.StepLR(_sgd(), step_size=2.0),
        TypeError,
        "step_size",
        "an int",
        "2.0 (float)",
    ),
    (
        "Plateau-str",
        lambda: optim.ReduceLROnPlateau(_sgd(), patience="3"),
        TypeError,
        "patience",
        "an int",
        "'3' (str)",
    ),
    (
        "BucketedBatches-float",
        lambda: data.BucketedBatches([1, 2], 2.0),
        TypeError,
        "batch_size",
        "an int",
        "2.0 (float)",
    ),
    (
        "pad_sequences-str",
        lambda: data.pad_sequences([[1]], maxlen="3"),
        TypeError,
        "maxlen",
        "an int",
        "'3' (str)",
    ),
    (
        "lengths_to_mask-float",
        lambda: data.lengths_to_mask([1, 2], 8.0),
        TypeError,
        "steps",
        "an int",
        "8.0 (float)",
    ),
    (
        "Vocabulary-bool",
        lambda: data.Vocabulary.build([["a"]], min_count=True),
        TypeError,
        "min_count",
        "an int",
        "True (bool)",
    ),
    (
        "set_num_threads-float",
        lambda: rnnfast.set_num_threads(2.0),
        TypeError,
        "n",
        "an int",
        "2.0 (float)",
    ),
    # ---- a bool given as a str or an int: TypeError -------------------------------------------
    (
        "RNN-bias-str",
        lambda: rnnfast.RNN(D, H, bias="False"),
        TypeError,
        "bias",
        "a bool",
        "'False' (str)",
    ),
    (
        "RNN-batch_first-int",
        lambda: rnnfast.RNN(D, H, batch_first=1),
        TypeError,
        "batch_first",
        "a bool",
        "1 (int)",
    ),
    (
        "Linear-bias-int",
        lambda: rnnfast.Linear(D, H, bias=0),
        TypeError,
        "bias",
        "a bool",
        "0 (int)",
    ),
    (
        "Embedding-mask_zero-str",
        lambda: rnnfast.Embedding(4, D, mask_zero="yes"),
        TypeError,
        "mask_zero",
        "a bool",
        "'yes' (str)",
    ),
    (
        "SGD-nesterov-int",
        lambda: optim.SGD(_param(), lr=0.1, momentum=0.9, nesterov=1),
        TypeError,
        "nesterov",
        "a bool",
        "1 (int)",
    ),
    (
        "BucketedBatches-shuffle-str",
        lambda: data.BucketedBatches([1, 2], 2, shuffle="False"),
        TypeError,
        "shuffle",
        "a bool",
        "'False' (str)",
    ),
    (
        "pad_sequences-batch_first-int",
        lambda: data.pad_sequences([[1]], batch_first=1),
        TypeError,
        "batch_first",
        "a bool",
        "1 (int)",
    ),
    (
        "RNN-zero_output_for_mask-int",
        lambda: rnnfast.RNN(D, H, zero_output_for_mask=1),
        TypeError,
        "zero_output_for_mask",
        "a bool or None",
        "1 (int)",
    ),
    (
        "rnn_forward-zero_output_for_mask-str",
        lambda: _forward(zero_output_for_mask="True"),
        TypeError,
        "zero_output_for_mask",
        "a bool",
        "'True' (str)",
    ),
    # ---- a positive int given 0 or -1: ValueError ---------------------------------------------
    ("RNN-zero", lambda: rnnfast.RNN(D, 0), ValueError, "hidden_size", "an int >= 1", "0 (int)"),
    (
        "RNN-layers-neg",
        lambda: rnnfast.RNN(D, H, num_layers=-1),
        ValueError,
        "num_layers",
        "an int >= 1",
        "-1 (int)",
    ),
    (
        "Linear-zero",
        lambda: rnnfast.Linear(0, H),
        ValueError,
        "in_features",
        "an int >= 1",
        "0 (int)",
    ),
    (
        "Embedding-neg",
        lambda: rnnfast.Embedding(-1, D),
        ValueError,
        "num_embeddings",
        "an int >= 1",
        "-1 (int)",
    ),
    (
        "StepLR-zero",
        lambda: optim.StepLR(_sgd(), step_size=0),
        ValueError,
        "step_size",
        "an int >= 1",
        "0 (int)",
    ),
    (
        "BucketedBatches-zero",
        lambda: data.BucketedBatches([1, 2], 0),
        ValueError,
        "batch_size",
        "an int >= 1",
        "0 (int)",
    ),
    (
        "pad_sequences-neg",
        lambda: data.pad_sequences([[1]], maxlen=-1),
        ValueError,
        "maxlen",
        "an int >= 1",
        "-1 (int)",
    ),
    (
        "RNN-dilation-zero",
        lambda: rnnfast.RNN(D, H, dilation=0),
        ValueError,
        "dilation",
        "an int >= 1",
        "0 (int)",
    ),
    # ---- a probability out of range: ValueError (torch's type) --------------------------------
    (
        "Dropout-above",
        lambda: rnnfast.Dropout(1.5),
        ValueError,
        "p",
        "a probability in [0, 1]",
        "1.5 (float)",
    ),
    (
        "Dropout-neg",
        lambda: rnnfast.Dropout(-0.1),
        ValueError,
        "p",
        "a probability in [0, 1]",
        "-0.1 (float)",
    ),
    (
        "RNN-dropout-above",
        lambda: rnnfast.RNN(D, H, num_layers=2, dropout=2.0),
        ValueError,
        "dropout",
        "a probability in [0, 1]",
        "2.0 (float)",
    ),
    (
        "RNN-recurrent_dropout-neg",
        lambda: rnnfast.RNN(D, H, recurrent_dropout=-0.5),
        ValueError,
        "recurrent_dropout",
        "a probability in [0, 1]",
        "-0.5 (float)",
    ),
    (
        "SGD-dampening-above",
        lambda: optim.SGD(_param(), lr=0.1, dampening=1.5),
        ValueError,
        "dampening",
        "a number in [0, 1]",
        "1.5 (float)",
    ),
    (
        "Adam-beta-one",
        lambda: optim.Adam(_param(), betas=(1.0, 0.9)),
        ValueError,
        "betas[0]",
        "a number in [0, 1)",
        "1.0 (float)",
    ),
    # ---- an array of the wrong dtype: TypeError -----------------------------------------------
    (
        "RNN-float64-x",
        lambda: rnnfast.RNN(D, H)(np.zeros((T, B, D))),
        TypeError,
        "x",
        "a float32 array (the layer's dtype)",
        "dtype float64 (shape (4, 2, 3))",
    ),
    (
        "Linear-float32-x",
        lambda: rnnfast.Linear(D, H, dtype=np.float64)(np.zeros((B, D), np.float32)),
        TypeError,
        "x",
        "a float64 array (the layer's dtype)",
        "dtype float32 (shape (2, 3))",
    ),
    (
        "Dropout-float64-x",
        lambda: rnnfast.Dropout(0.5)(np.zeros((B, D))),
        TypeError,
        "x",
        "a float32 array (the layer's dtype)",
        "dtype float64 (shape (2, 3))",
    ),
    (
        "rnn_forward-step_mask-float",
        lambda: _forward(step_mask=np.ones((T, B))),
        TypeError,
        "step_mask",
        "a bool (or 0/1 integer) array",
        "dtype float64 (shape (4, 2))",
    ),
    (
        "rnn_forward-lengths-float",
        lambda: _forward(lengths=np.array([1.0, 2.0])),
        TypeError,
        "lengths",
        "an integer array",
        "dtype float64 (shape (2,))",
    ),
    (
        "BucketedBatches-lengths-float",
        lambda: data.BucketedBatches([1.0, 2.0], 2),
        TypeError,
        "lengths",
        "an integer array",
        "dtype float64 (shape (2,))",
    ),
    (
        "RNN-dtype-int",
        lambda: rnnfast.RNN(D, H, dtype=np.int32),
        TypeError,
        "dtype",
        "float32 or float64",
        "dtype int32",
    ),
    # ---- a real number given as a str or a bool: TypeError ------------------------------------
    (
        "SGD-lr-str",
        lambda: optim.SGD(_param(), lr="0.1"),
        TypeError,
        "lr",
        "a real number",
        "'0.1' (str)",
    ),
    (
        "Adam-eps-bool",
        lambda: optim.Adam(_param(), eps=True),
        TypeError,
        "eps",
        "a real number",
        "True (bool)",
    ),
    (
        "clip_grad_norm-str",
        lambda: optim.clip_grad_norm([], "1"),
        TypeError,
        "max_norm",
        "a real number",
        "'1' (str)",
    ),
    (
        "RNN-alpha-str",
        lambda: rnnfast.RNN(D, H, alpha="0.5"),
        TypeError,
        "alpha",
        "a real number",
        "'0.5' (str)",
    ),
    # ---- a value out of range: ValueError -----------------------------------------------------
    (
        "SGD-lr-neg",
        lambda: optim.SGD(_param(), lr=-1.0),
        ValueError,
        "lr",
        "a number >= 0",
        "-1.0 (float)",
    ),
    (
        "RNN-alpha-zero",
        lambda: rnnfast.RNN(D, H, alpha=0.0),
        ValueError,
        "alpha",
        "a number in (0, 1]",
        "0.0 (float)",
    ),
    (
        "RNN-nonlinearity",
        lambda: rnnfast.RNN(D, H, nonlinearity="sigmoid"),
        ValueError,
        "nonlinearity",
        "'tanh' or 'relu'",
        "'sigmoid' (str)",
    ),
    (
        "Embedding-padding_idx",
        lambda: rnnfast.Embedding(4, D, padding_idx=9),
        ValueError,
        "padding_idx",
        "an int in [-4, 3]",
        "9 (int)",
    ),
]


@pytest.mark.parametrize(
    "call, exc, name, expected, got", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_one_type_and_one_message_per_kind(call, exc, name, expected, got):
    with pytest.raises(exc) as info:
        call()
    assert type(info.value) is exc  # not a subclass either: the policy's type, exactly
    want = f"{name}: expected {expected}, got {got}"
    assert str(info.value).startswith(want), (want, str(info.value))


def test_a_bool_given_as_its_str_names_the_bool_meant():
    with pytest.raises(TypeError, match=r"^batch_first: .*; pass batch_first=False$"):
        rnnfast.RNN(D, H, batch_first="False")
    with pytest.raises(TypeError, match=r"^shuffle: .*; pass shuffle=True$"):
        data.BucketedBatches([1, 2], 2, shuffle=1)


def test_a_dtype_mismatch_gives_the_fix():
    with pytest.raises(TypeError) as info:
        rnnfast.RNN(D, H)(np.zeros((T, B, D)))
    assert str(info.value).endswith(
        "; convert it with x.astype(np.float32), or build the layer with dtype=np.float64"
    )


def test_numpy_scalars_are_accepted_and_shown_as_numbers():
    layer = rnnfast.RNN(np.int64(D), np.int32(H), bias=np.True_)
    assert (layer.input_size, layer.hidden_size, layer.bias) == (D, H, True)
    assert type(layer.hidden_size) is int
    with pytest.raises(ValueError, match=r"^hidden_size: expected an int >= 1, got 0 \(int64\)$"):
        rnnfast.RNN(D, np.int64(0))


def test_a_long_value_is_cut_in_the_message():
    with pytest.raises(TypeError) as info:
        rnnfast.RNN(D, "x" * 500)
    assert len(str(info.value)) < 120 and str(info.value).endswith("... (str)")
