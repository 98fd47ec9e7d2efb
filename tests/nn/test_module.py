"""rnnfast.Module, the general container: subclasses with named children (a tagger, a
classifier, a model on the RNN's PyTorch form, nested containers, a list of layers, one array
feeding two children) compute what their layers called by hand compute, forward and backward
(and finite differences); parameters, state, modes, persistence, optimizers and fit work over
them; what the recorded backward cannot differentiate is refused, never silently wrong.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DTYPES, assert_close_any_dtype, numerical_gradient

import rnnfast
from rnnfast import RNN, Dense, Dropout, Embedding, Module, training
from rnnfast.optim import Adam

F64 = np.float64
V, E, H, K = 23, 4, 5, 3
LENGTHS = np.array([6, 2, 4, 1, 6])
T = int(LENGTHS.max())
FD_RTOL, FD_ATOL = 1e-6, 1e-8


def _padded_ids(rng, lengths=LENGTHS):
    ids = rng.integers(1, V, size=(len(lengths), int(max(lengths))))
    ids[np.arange(ids.shape[1])[None, :] >= np.asarray(lengths)[:, None]] = 0
    return ids


# ---- the models ----------------------------------------------------------------------------------
# Each has ``by_hand(x)`` / ``by_hand_backward(d)``: the same layers chained without the container.


class Tagger(Module):
    """Embedding (mask_zero) -> bidirectional RNN -> Dense, one tag per step."""

    def __init__(self, vocab=V, tags=K, dim=E, hidden=H, dtype=np.float32):
        super().__init__()
        self.embed = Embedding(vocab, dim, dtype=dtype, seed=1, mask_zero=True)
        self.rnn = RNN(
            dim,
            hidden,
            bidirectional=True,
            batch_first=True,
            return_sequences=True,
            dtype=dtype,
            seed=2,
        )
        self.head = Dense(2 * hidden, tags, dtype=dtype, seed=3)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids)))

    def by_hand(self, ids):
        self._lengths = np.count_nonzero(ids, axis=1)
        return self.head(self.rnn(self.embed(ids), lengths=self._lengths))

    def by_hand_backward(self, d):
        dx, _ = self.rnn.backward(self.head.backward(d))
        self.embed.backward(dx)


class Classifier(Module):
    """Embedding (mask_zero) -> RNN returning its last output -> Dense, one label per sequence."""

    def __init__(self, dtype=np.float32):
        super().__init__()
        self.embed = Embedding(V, E, dtype=dtype, seed=4, mask_zero=True)
        self.rnn = RNN(
            E, H, num_layers=2, batch_first=True, return_sequences=False, dtype=dtype, seed=5
        )
        self.head = Dense(H, K, dtype=dtype, seed=6)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids)))

    def by_hand(self, ids):
        return self.head(self.rnn(self.embed(ids), lengths=np.count_nonzero(ids, axis=1)))

    def by_hand_backward(self, d):
        dx, _ = self.rnn.backward(self.head.backward(d))
        self.embed.backward(dx)


class TorchForm(Module):
    """The RNN in PyTorch's form: ``y, h_n = self.rnn(x)``; time-major float input."""

    def __init__(self, dtype=np.float32):
        super().__init__()
        self.rnn = RNN(E, H, bidirectional=True, dtype=dtype, seed=7)
        self.head = Dense(2 * H, K, dtype=dtype, seed=8)

    def forward(self, x):
        y, h_n = self.rnn(x)
        return self.head(y)

    def by_hand(self, x):
        y, _ = self.rnn(x)
        return self.head(y)

    def by_hand_backward(self, d):
        return self.rnn.backward(self.head.backward(d))[0]


class Encoder(Module):
    def __init__(self, dtype=np.float32):
        super().__init__()
        self.rnn = RNN(E, H, batch_first=True, return_sequences=True, dtype=dtype, seed=9)
        self.drop = Dropout(0.0, dtype=dtype)
        self.proj = Dense(H, H, dtype=dtype, seed=10)

    def forward(self, x):
        return self.proj(self.drop(self.rnn(x)))


class Nested(Module):
    """A Module inside a Module, and a list of layers as a child."""

    def __init__(self, dtype=np.float32):
        super().__init__()
        self.embed = Embedding(V, E, dtype=dtype, seed=11, mask_zero=True)
        self.encoder = Encoder(dtype)
        self.blocks = [Dense(H, H, dtype=dtype, seed=12), Dense(H, K, dtype=dtype, seed=13)]

    def forward(self, ids):
        h = self.encoder(self.embed(ids))
        for block in self.blocks:
            h = block(h)
        return h

    def by_hand(self, ids):
        enc = self.encoder
        h = enc.proj(enc.drop(enc.rnn(self.embed(ids), lengths=np.count_nonzero(ids, axis=1))))
        for block in self.blocks:
            h = block(h)
        return h

    def by_hand_backward(self, d):
        for block in reversed(self.blocks):
            d = block.backward(d)
        enc = self.encoder
        dx, _ = enc.rnn.backward(enc.drop.backward(enc.proj.backward(d)))
        self.embed.backward(dx)


class TwoHeads(Module):
    """One array feeding two children (its gradient is the sum), and a tuple output."""

    def __init__(self, dtype=np.float32):
        super().__init__()
        self.rnn = RNN(E, H, batch_first=True, return_sequences=True, dtype=dtype, seed=14)
        self.tags = Dense(H, K, dtype=dtype, seed=15)
        self.score = Dense(H, 1, dtype=dtype, seed=16)

    def forward(self, x):
        h = self.rnn(x)
        return self.tags(h), self.score(h)

    def by_hand(self, x):
        h = self.rnn(x)
        return self.tags(h), self.score(h)

    def by_hand_backward(self, d):
        return self.rnn.backward(self.tags.backward(d[0]) + self.score.backward(d[1]))[0]


def _input(kind, rng, dtype):
    if kind in ("tagger", "classifier", "nested"):
        return _padded_ids(rng)
    if kind == "torch-form":
        return rng.standard_normal((T, len(LENGTHS), E)).astype(dtype)
    return rng.standard_normal((len(LENGTHS), T, E)).astype(dtype)


MODELS = {
    "tagger": Tagger,
    "classifier": Classifier,
    "torch-form": TorchForm,
    "nested": Nested,
    "two-heads": TwoHeads,
}


def _build(kind, dtype):
    return MODELS[kind](dtype=dtype)


def _weights_like(out, rng):
    if isinstance(out, tuple):
        return tuple(_weights_like(o, rng) for o in out)
    return rng.standard_normal(out.shape).astype(out.dtype)


def _dot(out, weights):
    if isinstance(out, tuple):
        return sum(_dot(o, w) for o, w in zip(out, weights))
    return float(np.sum(np.asarray(out, F64) * weights))


# ---- forward and backward equal the layers by hand --------------------------------------------


@pytest.mark.parametrize("kind", list(MODELS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_and_backward_equal_the_layers_by_hand(kind, dtype, rng):
    model = _build(kind, dtype)
    x = _input(kind, rng, dtype)
    out = model(x)
    weights = _weights_like(out, rng)
    model.zero_grad()
    dx = model.backward(weights)
    grads = {k: g.copy() for k, g in model.grads.items()}

    model.zero_grad()
    expected = model.by_hand(x)
    expected_dx = model.by_hand_backward(weights)
    for a, b in zip(
        out if isinstance(out, tuple) else (out,),
        expected if isinstance(expected, tuple) else (expected,),
    ):
        assert_close_any_dtype(a, b, dtype, "output")
    assert sorted(grads) == sorted(model.grads)
    for name, g in model.grads.items():
        assert np.any(g != 0), f"d{name}: all zero"
        assert_close_any_dtype(grads[name], g, dtype, f"d{name}")
    if expected_dx is None:
        assert dx is None  # token ids have no gradient
    else:
        assert_close_any_dtype(dx, expected_dx, dtype, "dx")


@pytest.mark.parametrize("kind", list(MODELS))
def test_gradients_match_finite_differences(kind, rng):
    model = _build(kind, F64)
    x = _input(kind, rng, F64)
    weights = _weights_like(model(x), rng)
    model.zero_grad()
    model(x)
    dx = model.backward(weights)

    def loss():
        return _dot(model(x), weights)

    for name, p in model.named_parameters():
        np.testing.assert_allclose(
            model.grads[name],
            numerical_gradient(loss, p),
            rtol=FD_RTOL,
            atol=FD_ATOL,
            err_msg=f"d{name}",
        )
    if dx is not None:
        np.testing.assert_allclose(
            dx, numerical_gradient(loss, x), rtol=FD_RTOL, atol=FD_ATOL, err_msg="dx"
        )


def test_padding_travels_through_the_container(rng):
    """mask_zero reaches the RNN without forward passing it: the padded batch equals each
    sequence alone, and the output's valid mask is the model's output_mask."""
    model = Tagger(dtype=F64)
    ids = _padded_ids(rng)
    out = model(ids)
    valid = np.arange(T)[None, :] < LENGTHS[:, None]
    np.testing.assert_array_equal(model.output_mask, valid)
    for b, n in enumerate(LENGTHS):
        assert_close_any_dtype(out[b, :n], model(ids[b : b + 1, :n])[0], F64, f"sequence {b}")
    classifier = Classifier(dtype=F64)
    last = classifier(ids)
    assert classifier.output_mask is None
    for b, n in enumerate(LENGTHS):
        assert_close_any_dtype(last[b], classifier(ids[b : b + 1, :n])[0], F64, f"sequence {b}")


def test_torch_form_can_return_the_state(rng):
    """(logits, h_n) out of forward; backward takes a gradient for each (None for h_n too)."""

    class WithState(TorchForm):
        def forward(self, x):
            y, h_n = self.rnn(x)
            return self.head(y), h_n

    model = WithState(dtype=F64)
    x = _input("torch-form", rng, F64)
    logits, h_n = model(x)
    d_logits, d_h = rng.standard_normal(logits.shape), rng.standard_normal(h_n.shape)
    model.zero_grad()
    dx = model.backward((d_logits, d_h))
    grads = {k: g.copy() for k, g in model.grads.items()}
    model.zero_grad()
    y, _ = model.rnn(x)
    model.head(y)
    expected_dx, _ = model.rnn.backward(model.head.backward(d_logits), d_h)
    assert_close_any_dtype(dx, expected_dx, F64, "dx")
    for name, g in model.grads.items():
        assert_close_any_dtype(grads[name], g, F64, f"d{name}")
    # no gradient for h_n: the model without its state
    model.zero_grad()
    model(x)
    model.backward((d_logits, None))
    without = {k: g.copy() for k, g in model.grads.items()}
    model.zero_grad()
    model.by_hand(x)
    model.by_hand_backward(d_logits)
    for name, g in model.grads.items():
        assert_close_any_dtype(without[name], g, F64, f"d{name} (no h_n gradient)")


class EncoderDecoder(Module):
    """Two inputs; the encoder's h_n (the second part of its PyTorch-form output) is the
    decoder's h0: its gradient goes back into the encoder as dh_n."""

    def __init__(self):
        super().__init__()
        self.encoder = RNN(E, H, num_layers=2, batch_first=True, dtype=F64, seed=17)
        self.decoder = RNN(
            K, H, num_layers=2, batch_first=True, return_sequences=True, dtype=F64, seed=18
        )
        self.head = Dense(H, K, dtype=F64, seed=19)

    def forward(self, source, target):
        _, state = self.encoder(source)
        return self.head(self.decoder(target, state))


def test_a_state_handed_from_one_rnn_to_another(rng):
    model = EncoderDecoder()
    source = rng.standard_normal((3, 5, E))
    target = rng.standard_normal((3, 4, K))
    out = model(source, target)
    weights = rng.standard_normal(out.shape)
    model.zero_grad()
    d_source = model.backward(weights)
    grads = {k: g.copy() for k, g in model.grads.items()}

    model.zero_grad()
    _, state = model.encoder(source)
    expected = model.head(model.decoder(target, state))
    assert_close_any_dtype(out, expected, F64, "output")
    _, d_state = model.decoder.backward(model.head.backward(weights))
    expected_dx, _ = model.encoder.backward(None, d_state)
    assert_close_any_dtype(d_source, expected_dx, F64, "d_source")
    for name, g in model.grads.items():
        assert np.any(grads[name] != 0), name
        assert_close_any_dtype(grads[name], g, F64, f"d{name}")

    def loss():
        return _dot(model(source, target), weights)

    for name in ("encoder.weight_hh_l0", "encoder.bias_ih_l1", "decoder.weight_ih_l0"):
        p = dict(model.named_parameters())[name]
        np.testing.assert_allclose(
            grads[name], numerical_gradient(loss, p), rtol=FD_RTOL, atol=FD_ATOL, err_msg=f"d{name}"
        )


# ---- parameters, state, modes --------------------------------------------------------------------


def test_parameter_names_follow_the_attributes():
    tagger = Tagger()
    rnn_names = [
        "weight_ih_l0",
        "weight_hh_l0",
        "bias_ih_l0",
        "bias_hh_l0",
        "weight_ih_l0_reverse",
        "weight_hh_l0_reverse",
        "bias_ih_l0_reverse",
        "bias_hh_l0_reverse",
    ]
    expected = ["embed.weight", *(f"rnn.{n}" for n in rnn_names), "head.weight", "head.bias"]
    assert [n for n, _ in tagger.named_parameters()] == expected
    assert list(tagger.state_dict()) == expected
    assert sorted(tagger.grads) == sorted(expected)
    # live arrays: the children's own
    assert tagger.named_parameters()[0][1] is tagger.embed.weight
    assert all(a is b for a, b in zip(tagger.parameters()[1:9], tagger.rnn.parameters()))
    assert [n for n, _ in tagger.named_children()] == ["embed", "rnn", "head"]

    nested = Nested()
    names = [n for n, _ in nested.named_parameters()]
    assert names == [
        "embed.weight",
        "encoder.rnn.weight_ih_l0",
        "encoder.rnn.weight_hh_l0",
        "encoder.rnn.bias_ih_l0",
        "encoder.rnn.bias_hh_l0",
        "encoder.proj.weight",
        "encoder.proj.bias",
        "blocks.0.weight",
        "blocks.0.bias",
        "blocks.1.weight",
        "blocks.1.bias",
    ]
    assert list(nested.state_dict()) == names
    assert [n for n, _ in nested.named_children()] == ["embed", "encoder", "blocks.0", "blocks.1"]
    assert "(encoder)" in repr(nested) and "(blocks.1)" in repr(nested)


def test_attributes_that_are_not_layers_are_not_children():
    class WithExtras(Tagger):
        def __init__(self):
            super().__init__()
            self.scale = 2.0
            self.names = ["a", "b"]
            self.empty = []

    model = WithExtras()
    assert [n for n, _ in model.named_children()] == ["embed", "rnn", "head"]
    assert model.scale == 2.0 and model.names == ["a", "b"]
    model.head = 5  # replacing a child by a plain value removes the child
    assert [n for n, _ in model.named_children()] == ["embed", "rnn"]
    del model.rnn
    assert [n for n, _ in model.named_children()] == ["embed"]
    with pytest.raises(AttributeError):
        _ = model.rnn


def test_zero_grad_clears_every_child_in_place(rng):
    model = Nested()
    ids = _padded_ids(rng)
    out = model(ids)
    model.backward(np.ones_like(out))
    live = {k: g for k, g in model.grads.items()}
    assert all(np.any(g != 0) for g in live.values())
    model.zero_grad()
    assert all(np.all(g == 0) for g in model.grads.values())
    assert all(model.grads[k] is g for k, g in live.items())


def test_train_and_eval_reach_every_child(rng):
    model = Nested()
    model.encoder.drop.p = 0.5  # dropout shows the mode
    layers = [
        model.embed,
        model.encoder,
        model.encoder.rnn,
        model.encoder.drop,
        model.encoder.proj,
        *model.blocks,
    ]
    assert model.eval() is model
    assert not model.training and not any(layer.training for layer in layers)
    ids = _padded_ids(rng)
    first = model(ids)
    np.testing.assert_array_equal(model(ids), first)  # no dropout in eval
    with pytest.raises(RuntimeError, match="no training forward"):
        model.backward(np.ones_like(first))
    assert model.train() is model
    assert model.training and all(layer.training for layer in layers)
    assert not np.array_equal(model(ids), first)  # dropout again
    model.train(False)
    assert not any(layer.training for layer in layers)


def test_load_state_dict_round_trip_and_atomic_on_error(rng):
    source, target = Tagger(), Tagger()
    with rnnfast.writable_parameters(source):  # its recurrent layer's are read-only
        for p in source.parameters():
            p += rng.standard_normal(p.shape).astype(p.dtype)
    target.load_state_dict(source.state_dict())
    for k, v in source.state_dict().items():
        np.testing.assert_array_equal(target.state_dict()[k], v)

    fresh = Tagger()
    before = {k: v.copy() for k, v in fresh.state_dict().items()}

    def unchanged():
        for k, v in fresh.state_dict().items():
            np.testing.assert_array_equal(v, before[k], err_msg=k)

    state = source.state_dict()
    missing = dict(state)
    del missing["rnn.bias_hh_l0"]
    with pytest.raises(ValueError, match="rnn.bias_hh_l0"):
        fresh.load_state_dict(missing)
    unchanged()
    with pytest.raises(ValueError, match="unexpected.*extra"):
        fresh.load_state_dict({**state, "extra.weight": np.zeros(3)})
    unchanged()
    with pytest.raises(ValueError, match="head.weight"):
        fresh.load_state_dict({**state, "head.weight": np.zeros((K, 3))})
    unchanged()
    # the shapes fit, but the last child refuses its values after the first ones were loaded
    bad = {**state, "head.bias": np.array(["x"] * K)}
    with pytest.raises(TypeError, match="bias"):
        fresh.load_state_dict(bad)
    unchanged()


class Configured(Module):
    """Constructor arguments of every kind the config records (a dtype among them)."""

    def __init__(self, vocab, tags, hidden=6, *, bidirectional=True, dtype=np.float64):
        super().__init__()
        self.embed = Embedding(vocab, E, dtype=dtype, mask_zero=True)
        self.rnn = RNN(
            E,
            hidden,
            batch_first=True,
            bidirectional=bidirectional,
            return_sequences=True,
            dtype=dtype,
        )
        self.head = Dense(hidden * (2 if bidirectional else 1), tags, dtype=dtype)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids)))


def test_save_and_load_round_trip(tmp_path, rng):
    model = Configured(V, K, hidden=7, bidirectional=False)
    assert model.get_config() == {
        "vocab": V,
        "tags": K,
        "hidden": 7,
        "bidirectional": False,
        "dtype": np.float64,
    }
    path = tmp_path / "tagger.npz"
    model.save(path)
    loaded = rnnfast.load(path, cls=Configured)
    assert type(loaded) is Configured
    assert loaded.rnn.hidden_size == 7 and not loaded.rnn.bidirectional
    assert loaded.get_config()["dtype"] in ("float64", np.float64)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(loaded.state_dict()[k], v)
    ids = _padded_ids(rng)
    model.eval()
    loaded.eval()
    np.testing.assert_array_equal(loaded(ids), model(ids))

    # by name too: load finds the class among the defined subclasses of rnnfast.nn.Layer
    assert type(rnnfast.load(path)) is Configured
    with pytest.raises(ValueError, match="Configured"):
        rnnfast.load(path, cls=Tagger)


def test_adam_steps_a_module_as_it_steps_its_layers(rng):
    """Adam(model) moves every parameter, exactly as Adam over the same layers listed."""
    model, twin = Tagger(dtype=F64), Tagger(dtype=F64)
    opt = Adam(model, lr=0.01)
    opt_twin = Adam([twin.embed, twin.rnn, twin.head], lr=0.01)
    start = {k: v.copy() for k, v in model.state_dict().items()}
    ids = _padded_ids(rng)
    for _ in range(3):
        for m, o in ((model, opt), (twin, opt_twin)):
            m.zero_grad()
            out = m(ids)
            m.backward(np.asarray(out) - 1.0)
            o.step()
    for name, v in model.state_dict().items():
        np.testing.assert_array_equal(v, twin.state_dict()[name], err_msg=name)
        if name != "embed.weight":
            assert not np.array_equal(v, start[name]), f"{name} did not move"
    moved = np.any(model.embed.weight != start["embed.weight"], axis=1)
    np.testing.assert_array_equal(moved[1:], np.isin(np.arange(1, V), ids))
    assert not moved[0]  # the padding id reaches no loss


def test_fit_trains_a_module_on_ragged_data(rng):
    """A tag that is a function of the token: fit on ragged sequences drives the loss down and
    the tagger reaches a high token accuracy."""
    tags_of = rng.integers(0, K, size=V)
    tags_of[0] = 0
    seqs = [rng.integers(1, V, size=n) for n in rng.integers(1, 12, size=120)]
    tags = [tags_of[s] for s in seqs]
    model = Tagger(hidden=16, dim=8)
    before = training.evaluate(model, seqs, tags, loss="cross_entropy", metrics=["accuracy"])
    history = training.fit(
        model,
        seqs,
        tags,
        loss="cross_entropy",
        optimizer=Adam(model, lr=0.05),
        epochs=15,
        batch_size=16,
        seed=0,
        verbose=False,
        metrics=["accuracy"],
    )
    after = training.evaluate(model, seqs, tags, loss="cross_entropy", metrics=["accuracy"])
    assert history["loss"][-1] < history["loss"][0] / 4
    assert after["loss"] < before["loss"] / 4
    assert after["accuracy"] > 0.95
    outputs = training.predict(model, seqs)
    assert [o.shape for o in outputs] == [(len(s), K) for s in seqs]


# ---- what the recorded backward cannot do is refused ------------------------------------------


def test_a_child_called_twice_in_training_is_refused(rng):
    class Twice(Module):
        def __init__(self):
            super().__init__()
            self.a = Dense(E, E, seed=1)

        def forward(self, x):
            return self.a(self.a(x))

    model = Twice()
    x = rng.standard_normal((3, E)).astype(np.float32)
    with pytest.raises(RuntimeError, match=r"self\.a: called twice"):
        model(x)
    model.eval()
    a = model.a
    np.testing.assert_allclose(model(x), a(a(x)), rtol=1e-6)  # no backward, no refusal


@pytest.mark.parametrize("operation", ["scale", "slice", "concat", "in-place", "bypass"])
def test_an_operation_between_children_is_refused(operation, rng):
    class Between(Module):
        def __init__(self):
            super().__init__()
            self.embed = Embedding(V, E, seed=1, mask_zero=True)
            self.rnn = RNN(E, H, batch_first=True, return_sequences=True, seed=2)
            self.head = Dense(H, K, seed=3)

        def forward(self, ids):
            h = self.rnn(self.embed(ids))
            if operation == "scale":
                h = 2 * h
            elif operation == "slice":
                h = h[:, -1]
            elif operation == "concat":
                h = np.concatenate([h, h], axis=1)
            elif operation == "in-place":
                h = self.head(h)
                h *= 2  # the container never sees it: refused at once
                return h
            elif operation == "bypass":  # the layer's forward called directly: recorded too
                return self.head.forward(h)
            return self.head(h)

    model = Between()
    ids = _padded_ids(rng)
    if operation == "in-place":
        with pytest.raises(ValueError, match="read-only"):
            model(ids)
        return
    out = model(ids)
    model.zero_grad()
    if operation == "bypass":
        model.backward(np.ones_like(out))
        assert all(np.any(g != 0) for g in model.grads.values())
        return
    with pytest.raises(RuntimeError, match=r"self\.head.*operation between layers"):
        model.backward(np.ones_like(out))
    # refused before any child's backward ran: no gradient was half-added
    assert all(np.all(g == 0) for g in model.grads.values())


def test_an_operation_inside_a_nested_container_before_its_first_layer_is_refused(rng):
    """The inner model's first layer reads NumPy arithmetic of its input; the outer model
    needs that input's gradient (for its Embedding): refused, not a zero Embedding gradient."""

    class Inner(Module):
        def __init__(self):
            super().__init__()
            self.rnn = RNN(E, H, batch_first=True, return_sequences=False, seed=2)

        def forward(self, x):
            return self.rnn(x * 2.0)

    class Outer(Module):
        def __init__(self):
            super().__init__()
            self.embed = Embedding(V, E, seed=1)
            self.inner = Inner()

        def forward(self, ids):
            return self.inner(self.embed(ids))

    model = Outer()
    out = model(rng.integers(1, V, size=(3, 5)))
    model.zero_grad()
    with pytest.raises(RuntimeError, match=r"self\.inner"):
        model.backward(np.ones_like(out))
    assert all(np.all(g == 0) for g in model.grads.values())

    # at the top, preparing the model's own input is allowed: the parameters' gradients are
    # right, and the input's gradient is unknown (None), never a wrong array
    inner = Inner()
    x = rng.standard_normal((3, 5, E)).astype(np.float32)
    out = inner(x)
    inner.zero_grad()
    assert inner.backward(np.ones_like(out)) is None
    g = inner.grads["rnn.weight_ih_l0"].copy()
    inner.zero_grad()
    inner.rnn(x * 2.0)
    inner.rnn.backward(np.ones_like(out))
    np.testing.assert_allclose(g, inner.grads["rnn.weight_ih_l0"], rtol=1e-6)


@pytest.mark.parametrize("returned", ["arithmetic", "slice", "numpy"])
def test_a_forward_returning_a_numpy_array_is_refused(returned, rng):
    class Returns(Module):
        def __init__(self):
            super().__init__()
            self.rnn = RNN(E, H, batch_first=True, return_sequences=True, seed=1)

        def forward(self, x):
            h = self.rnn(x)
            if returned == "arithmetic":
                return h * 0.5
            if returned == "slice":
                return h[:, -1]
            return np.tanh(h)

    model = Returns()
    out = model(rng.standard_normal((3, 4, E)).astype(np.float32))
    model.zero_grad()
    with pytest.raises(RuntimeError, match="no child layer returned"):
        model.backward(np.ones_like(out))
    assert all(np.all(g == 0) for g in model.grads.values())


def test_forgetting_super_init_is_a_clear_error():
    class Forgot(Module):
        def __init__(self):
            self.rnn = RNN(E, H)

    with pytest.raises(RuntimeError, match=r"super\(\).__init__\(\)"):
        Forgot()


def test_forward_must_be_defined(rng):
    class NoForward(Module):
        def __init__(self):
            super().__init__()
            self.head = Dense(E, K)

    with pytest.raises(NotImplementedError, match="forward"):
        NoForward()(rng.standard_normal((2, E)))


def test_backward_needs_a_training_forward_and_allows_one(rng):
    model = TwoHeads()
    x = _input("two-heads", rng, np.float32)
    with pytest.raises(RuntimeError, match="no training forward"):
        model.backward((None, None))
    out = model(x)
    model.backward(_weights_like(out, rng))
    with pytest.raises(RuntimeError, match="no training forward"):
        model.backward(_weights_like(out, rng))


class FusedTagger(Tagger):
    """The Tagger with its Embedding handed to the RNN (the fused token-input path)."""

    def forward(self, ids):
        return self.head(self.rnn(ids, embedding=self.embed))


def test_an_embedding_handed_to_the_rnn_runs_fused_with_its_padding(rng):
    ids = _padded_ids(rng)
    fused, plain = FusedTagger(dtype=F64), Tagger(dtype=F64)
    out_fused, out_plain = fused(ids), plain(ids)
    np.testing.assert_array_equal(fused.output_mask, plain.output_mask)
    valid = plain.output_mask
    np.testing.assert_allclose(out_fused[valid], out_plain[valid], rtol=1e-12, atol=1e-12)
    d = rng.standard_normal(out_plain.shape) * valid[..., None]
    fused.backward(d)
    plain.backward(d)
    for name, g in plain.grads.items():
        np.testing.assert_allclose(fused.grads[name], g, rtol=1e-10, atol=1e-12, err_msg=name)


def test_module_says_whether_its_backward_only_runs_the_childrens():
    """What rnnfast.distributed's hooks ask: the tape's backward runs each child's once; a
    subclass with a backward of its own is one whole (and a Seq2Seq always is)."""

    class OwnBackward(Tagger):
        def backward(self, d_out):
            return super().backward(d_out)

    assert Tagger(5, 4, 3).backward_runs_children()
    assert not OwnBackward(5, 4, 3).backward_runs_children()
    assert Tagger(5, 4, 3).children_run_by(None) == ()
