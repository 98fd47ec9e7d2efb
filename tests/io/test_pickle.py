"""Layers and models pickle and deep-copy (as docs/quickstart.rst says): RNN, Sequential, a Module
subclass and Seq2Seq round-trip through pickle.dumps / pickle.loads and copy.deepcopy with
their parameters, options, carried state, dropout generator and training cache, give the same
outputs and gradients as the original, and are independent of it."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import rnnfast
from rnnfast import RNN, Dense, Embedding, Module, Seq2Seq, Sequential, optim, training

ROUND_TRIPS = {"pickle": lambda obj: pickle.loads(pickle.dumps(obj)), "deepcopy": copy.deepcopy}
round_trip = pytest.mark.parametrize("trip", list(ROUND_TRIPS.values()), ids=list(ROUND_TRIPS))


class Classifier(Module):
    """A Module subclass: an RNN read forwards, its outputs read backwards by a second one, a
    Dense on the last state."""

    def __init__(self):
        super().__init__()
        self.fwd = RNN(4, 6, batch_first=True, return_sequences=True, seed=1)
        self.bwd = RNN(6, 5, batch_first=True, return_sequences=False, go_backwards=True, seed=2)
        self.out = Dense(5, 3, seed=3)

    def forward(self, x):
        return self.out(self.bwd(self.fwd(x)))


def _x(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _same_parameters(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        np.testing.assert_array_equal(sa[k], sb[k], err_msg=k)


@round_trip
def test_rnn(trip):
    layer = RNN(
        4,
        6,
        num_layers=2,
        bidirectional=True,
        dropout=0.3,
        dtype=np.float64,
        seed=0,
        nonlinearity="relu",
        merge_mode="sum",
        batch_first=True,
        return_sequences=True,
        input_dropout=0.2,
        recurrent_dropout=0.2,
    )
    x = _x((3, 5, 4), np.float64)
    y = layer(x)  # training mode: the cache of this call travels too
    other = trip(layer)
    assert repr(other) == repr(layer) and other.get_config() == layer.get_config()
    _same_parameters(layer, other)
    d = _x(y.shape, np.float64, seed=1)
    for a, b in zip(layer.backward(d), other.backward(d)):  # dx, dh0
        np.testing.assert_array_equal(a, b)
    for k in layer.grads:
        np.testing.assert_array_equal(layer.grads[k], other.grads[k], err_msg=k)
    # the dropout generator was copied in its state: the next training call draws the same masks
    # (between the layers, on the inputs and on h_{t-1})
    np.testing.assert_array_equal(layer(x), other(x))
    layer.eval(), other.eval()
    np.testing.assert_array_equal(layer(x), other(x))


@round_trip
def test_stateful_rnn_keeps_its_carried_state(trip):
    layer = RNN(4, 6, stateful=True, seed=0)
    layer(_x((5, 2, 4)))
    other = trip(layer)
    np.testing.assert_array_equal(other.state, layer.state)
    x = _x((3, 2, 4), seed=2)
    np.testing.assert_array_equal(layer(x)[0], other(x)[0])
    out, h = layer.step(x[0])
    out2, h2 = other.step(x[0])
    np.testing.assert_array_equal(out, out2)


@round_trip
def test_sequential_trains_on_as_the_original(trip):
    ids = [np.random.default_rng(k).integers(1, 12, k % 5 + 2) for k in range(24)]
    labels = np.arange(24) % 2
    model = Sequential(
        [
            Embedding(12, 5, mask_zero=True, seed=0),
            RNN(5, 7, batch_first=True, return_sequences=False, seed=1),
            Dense(7, 2, seed=2),
        ]
    )
    other = trip(model)
    padded, lengths = rnnfast.pad_sequences(ids, batch_first=True)
    np.testing.assert_array_equal(model(padded, lengths=lengths), other(padded, lengths=lengths))
    for m in (model, other):
        training.fit(
            m,
            ids,
            labels,
            loss="cross_entropy",
            optimizer=optim.Adam(m, lr=0.01),
            epochs=2,
            batch_size=8,
            seed=0,
            verbose=False,
        )
    _same_parameters(model, other)
    copy_before = {k: v.copy() for k, v in other.state_dict().items()}
    training.fit(
        model,
        ids,
        labels,
        loss="cross_entropy",
        optimizer=optim.Adam(model),
        epochs=1,
        batch_size=8,
        seed=1,
        verbose=False,
    )
    for k, v in other.state_dict().items():  # training the original left the copy alone
        np.testing.assert_array_equal(v, copy_before[k], err_msg=k)


@round_trip
def test_module_subclass(trip):
    model = Classifier()
    x = _x((3, 5, 4))
    y = model(x)
    other = trip(model)
    assert type(other) is Classifier
    _same_parameters(model, other)
    np.testing.assert_array_equal(other(x), y)
    d = _x(y.shape, seed=1)
    model.zero_grad(), other.zero_grad()
    model(x), other(x)
    np.testing.assert_array_equal(model.backward(d), other.backward(d))
    for k in model.grads:
        np.testing.assert_array_equal(model.grads[k], other.grads[k], err_msg=k)


@round_trip
def test_seq2seq(trip):
    model = Seq2Seq(11, 13, 6, 8, context="both", seed=0)
    rng = np.random.default_rng(0)
    src, src_len = rng.integers(0, 10, (4, 5)), np.array([5, 3, 4, 2])
    tgt_in, tgt_out, tgt_len = (
        rng.integers(0, 13, (4, 6)),
        rng.integers(0, 13, (4, 6)),
        np.array([6, 4, 5, 3]),
    )
    other = trip(model)
    _same_parameters(model, other)
    model.eval(), other.eval()
    np.testing.assert_array_equal(
        model.forward(src, src_len, tgt_in, tgt_len), other.forward(src, src_len, tgt_in, tgt_len)
    )
    for method in ("greedy", "beam"):
        a, _ = model.generate(src, src_len, 6, method, bos=11, eos=12, beam_width=3)
        b, _ = other.generate(src, src_len, 6, method, bos=11, eos=12, beam_width=3)
        np.testing.assert_array_equal(a, b)
    model.train(), other.train()
    batch = (src, src_len, tgt_in, tgt_out, tgt_len)
    loss_a, loss_b = (
        m.train_batch(*batch, teacher_forcing_ratio=0.5, rng=np.random.default_rng(3))
        for m in (model, other)
    )
    assert loss_a == loss_b
    for k in model.grads:
        np.testing.assert_array_equal(model.grads[k], other.grads[k], err_msg=k)


@round_trip
def test_a_copy_is_independent(trip):
    layer = RNN(4, 6, seed=0)
    other = trip(layer)
    other.state_dict()["weight_hh_l0"][...] = 0  # the state_dict is the layer's arrays
    other.load_state_dict({**other.state_dict(), "weight_ih_l0": np.zeros((6, 4), np.float32)})
    assert np.abs(layer.state_dict()["weight_ih_l0"]).max() > 0
    x = _x((5, 2, 4))
    assert not np.array_equal(layer(x)[0], other(x)[0])
