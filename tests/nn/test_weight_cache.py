"""The recurrent layers' packed weights, kept between calls (``_core.WeightCache`` per layer and
direction, ``rnnfast._parameters``): reused while nothing changed, made again after every
writer of the parameters (the outputs then those of a fresh layer, bit for bit), and the
parameters read-only outside the sanctioned writers. With invalidation disabled the same
writers leave stale packs, which the outputs show: the tests below can fail."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from conftest import numerical_gradient

import rnnfast
from rnnfast import _core, _parameters, functional, optim
from rnnfast.diagnostics import set_spectral_radius

T, B, D, H = 5, 4, 8, 16

LAYERS = {
    "rnn": lambda: rnnfast.RNN(D, H, seed=1),
    "rnn_bi_2": lambda: rnnfast.RNN(D, H, num_layers=2, bidirectional=True, seed=1),
    "rnn_dilated": lambda: rnnfast.RNN(D, H, num_layers=2, dilation=[1, 2], seed=1),
    "gru": lambda: rnnfast.GRU(D, H, seed=1),
    "gru_reset_before_bi": lambda: rnnfast.GRU(D, H, reset_after=False, bidirectional=True, seed=1),
    "lstm_2": lambda: rnnfast.LSTM(D, H, num_layers=2, seed=1),
    "lstm_proj": lambda: rnnfast.LSTM(D, H, proj_size=6, seed=1),
    "lstm_peepholes": lambda: rnnfast.LSTM(D, H, peepholes=True, seed=1),
    "layer_norm_lstm": lambda: rnnfast.LayerNormLSTM(D, H, seed=1),
    "deep_transition_1": lambda: rnnfast.DeepTransitionRNN(D, H, transition_layers=1, seed=1),
    "gru_cell": lambda: rnnfast.GRUCell(D, H, seed=1),
    "lstm_cell": lambda: rnnfast.LSTMCell(D, H, seed=1),
}


def _x(seed=0):
    return np.random.default_rng(seed).standard_normal((T, B, D)).astype(np.float32)


def _is_cell(layer):
    return isinstance(layer, (rnnfast.GRUCell, rnnfast.LSTMCell))


def _input(layer):
    return _x()[0] if _is_cell(layer) else _x()


def _first(out):
    """The output sequence of a layer's call (the new h of a cell's)."""
    return out[0] if isinstance(out, tuple) else out


def _train_step(layer):
    """One forward and backward: the output and every parameter's gradient (copies)."""
    layer.zero_grad()
    h = _first(layer(_input(layer)))
    layer.backward(np.ones_like(h))
    return np.array(h), {k: g.copy() for k, g in layer.grads.items()}


def _caches(layer):
    return [entry[0] for entry in layer.__dict__["_weight_caches"].entries.values()]


def _packs_made(layer):
    return sum(c.packs_made for c in _caches(layer))


def _fresh_twin(layer, name):
    """A layer that never held packed weights, with ``layer``'s parameter values."""
    twin = LAYERS[name]()
    twin.load_state_dict(layer.state_dict())
    return twin


def _assert_same(a, b):
    np.testing.assert_array_equal(a[0], b[0])
    for k in a[1]:
        np.testing.assert_array_equal(a[1][k], b[1][k], err_msg=k)


# ---- reuse ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(LAYERS))
def test_a_repeated_train_step_packs_nothing_again(name):
    layer = LAYERS[name]()
    first = _train_step(layer)
    made = _packs_made(layer)
    assert made > 0, "no packs were made: nothing to reuse"
    assert all(c.packs > 0 for c in _caches(layer))
    second = _train_step(layer)
    assert _packs_made(layer) == made  # forward and backward found every pack
    _assert_same(first, second)
    # and the packed weights compute what unpacked ones do
    layer.eval()
    y = _first(layer(_input(layer)))
    with rnnfast.writable_parameters(layer):  # caches bypassed while a block is open
        np.testing.assert_array_equal(_first(layer(_input(layer))), y)


def test_inference_calls_reuse_the_packs():
    layer = rnnfast.GRU(D, H, num_layers=2, bidirectional=True, seed=1).eval()
    y = layer(_x())[0]
    made = _packs_made(layer)
    for _ in range(3):
        np.testing.assert_array_equal(layer(_x())[0], y)
    assert _packs_made(layer) == made


# ---- every writer invalidates --------------------------------------------------------------------


def _optimizer_step(cls, **kw):
    def write(layer):
        opt = cls(layer, lr=0.05, **kw)
        opt.step()
        opt.step()

    return write


def _load_state_dict(layer):
    state = {k: v * 0.9 + 0.01 for k, v in layer.state_dict().items()}
    layer.load_state_dict(state)


def _context_manager(layer):
    with rnnfast.writable_parameters(layer):
        for p in layer.parameters():
            p *= 1.1


def _method_context_manager(layer):
    with layer.writable_parameters():
        layer.parameters()[0][...] *= -1.0  # weight_ih (a cell from zeros reads no W_hh)


def _flag_flip(layer):
    p = layer.parameters()[0]
    p.flags.writeable = True
    p *= 0.5
    p.flags.writeable = False
    layer.parameters_changed()


# the writers that change values in place, at the addresses the packs were made from
IN_PLACE = {
    "sgd": _optimizer_step(optim.SGD),
    "sgd_momentum": _optimizer_step(optim.SGD, momentum=0.9, nesterov=True),
    "adam": _optimizer_step(optim.Adam),
    "adamw": _optimizer_step(optim.AdamW),
    "rmsprop": _optimizer_step(optim.RMSprop),
    "load_state_dict": _load_state_dict,
    "writable_parameters": _context_manager,
    "layer.writable_parameters": _method_context_manager,
    "parameters_changed": _flag_flip,
}


def _rebind(layer):
    name = next(k for k in layer._params if k.startswith("weight_ih"))
    layer._params[name] = -layer._params[name]


WRITERS = {**IN_PLACE, "rebind": _rebind}


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("name", ["rnn_bi_2", "gru", "lstm_proj", "layer_norm_lstm", "lstm_cell"])
def test_every_writer_invalidates_the_packs(name, writer):
    layer = LAYERS[name]()
    before = _train_step(layer)
    made = _packs_made(layer)
    WRITERS[writer](layer)
    assert not any(p.flags.writeable for p in layer.parameters())
    after = _train_step(layer)
    assert _packs_made(layer) > made  # packed again
    assert not np.array_equal(after[0], before[0])  # the writer changed the weights
    _assert_same(after, _train_step(_fresh_twin(layer, name)))


@pytest.mark.parametrize("writer", list(IN_PLACE))
@pytest.mark.parametrize("name", ["rnn_bi_2", "gru", "lstm_proj", "lstm_cell"])
def test_a_stale_cache_fails_the_check(name, writer, monkeypatch):
    """What the invalidation tests rely on: with clear() disabled, the same writers leave the
    old packs in use, and the outputs differ from a fresh layer's."""
    monkeypatch.setattr(_core.WeightCache, "clear", lambda self: None)
    layer = LAYERS[name]()
    _train_step(layer)
    IN_PLACE[writer](layer)
    stale = _train_step(layer)
    monkeypatch.undo()
    fresh = _train_step(_fresh_twin(layer, name))
    assert not np.array_equal(stale[0], fresh[0])


def test_a_cache_that_ignores_the_epoch_is_stale(monkeypatch):
    """The epoch check itself: a layer that never sees the epoch move keeps stale packs."""
    monkeypatch.setattr(_parameters.ParameterOwner, "_fresh_caches", _keep_packs)
    layer = LAYERS["gru"]()
    _train_step(layer)
    optim.SGD(layer, lr=0.5).step()
    stale = _train_step(layer)
    monkeypatch.undo()
    assert not np.array_equal(stale[0], _train_step(_fresh_twin(layer, "gru"))[0])


def _keep_packs(self, caches, epoch):
    if caches is None:
        caches = self.__dict__["_weight_caches"] = _parameters._Caches(epoch)
    caches.epoch = epoch
    return caches


@pytest.mark.parametrize("how", ["deepcopy", "pickle", "copy"])
@pytest.mark.parametrize("name", ["rnn_bi_2", "lstm_proj", "gru_cell"])
def test_copies_have_read_only_parameters_and_caches_of_their_own(name, how):
    layer = LAYERS[name]()
    trained = _train_step(layer)
    twin = {
        "deepcopy": copy.deepcopy,
        "pickle": lambda m: pickle.loads(pickle.dumps(m)),
        "copy": copy.copy,
    }[how](layer)
    assert "_weight_caches" not in twin.__dict__
    assert isinstance(twin._params, _parameters.ParameterDict)
    assert not any(p.flags.writeable for p in twin.parameters())
    _assert_same(_train_step(twin), trained)
    if how != "copy":  # a shallow copy shares the arrays, as before
        optim.SGD(twin, lr=0.5).step()
        _assert_same(_train_step(layer), trained)  # the original's packs are its own
        assert not np.array_equal(_train_step(twin)[0], trained[0])


def test_set_spectral_radius_invalidates():
    layer = LAYERS["rnn_bi_2"]()
    before = _train_step(layer)
    set_spectral_radius(layer, 0.5)
    after = _train_step(layer)
    assert not np.array_equal(after[0], before[0])
    _assert_same(after, _train_step(_fresh_twin(layer, "rnn_bi_2")))


def test_a_sequential_trained_by_an_optimizer_repacks():
    model = rnnfast.Sequential(
        [rnnfast.Embedding(11, D, seed=0), rnnfast.LSTM(D, H, seed=0), rnnfast.Dense(H, 3, seed=0)]
    )
    ids = np.random.default_rng(0).integers(0, 11, size=(B, T))
    opt = optim.Adam(model, lr=0.05)
    outs = []
    for _ in range(2):
        model.zero_grad()
        out = model(ids)
        model.backward(np.ones_like(out))
        opt.step()
        outs.append(model(ids))
    fresh = rnnfast.Sequential(
        [rnnfast.Embedding(11, D, seed=0), rnnfast.LSTM(D, H, seed=0), rnnfast.Dense(H, 3, seed=0)]
    )
    fresh.load_state_dict(model.state_dict())
    np.testing.assert_array_equal(outs[-1], fresh(ids))
    assert not np.array_equal(outs[0], outs[1])


# ---- the read-only rule --------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(LAYERS))
def test_an_in_place_write_of_a_live_parameter_raises(name):
    layer = LAYERS[name]()
    for p in layer.parameters():
        with pytest.raises(ValueError, match="read-only"):
            p[...] = 0
        with pytest.raises(ValueError, match="read-only"):
            p += 1
    state = layer.state_dict()  # copies: the caller's to change
    assert all(v.flags.writeable for v in state.values())


def test_writable_parameters_restores_the_flags_and_leaves_writeable_arrays_writeable():
    rnn, dense = rnnfast.RNN(D, H, seed=0), rnnfast.Dense(H, 3, seed=0)
    model = rnnfast.Sequential([rnn, dense])
    extra = np.zeros(3)
    with rnnfast.writable_parameters(model, extra):
        assert all(p.flags.writeable for p in model.parameters())
        with rnnfast.writable_parameters(rnn):  # nested: the outer block keeps them writeable
            pass
        assert all(p.flags.writeable for p in rnn.parameters())
        assert rnn._weight_cache(0, 0) is None  # bypassed while a block is open
    assert not any(p.flags.writeable for p in rnn.parameters())
    assert all(p.flags.writeable for p in dense.parameters())
    assert extra.flags.writeable
    assert rnn._weight_cache(0, 0) is not None


def test_writable_parameters_restores_the_flags_after_an_error():
    layer = rnnfast.GRU(D, H, seed=0)
    with pytest.raises(RuntimeError, match="inside"):
        with rnnfast.writable_parameters(layer):
            raise RuntimeError("inside")
    assert not any(p.flags.writeable for p in layer.parameters())
    assert _parameters._EPOCH.open == 0


def test_writable_parameters_names_what_it_cannot_take():
    with pytest.raises(TypeError, match="writable_parameters.*str"):
        rnnfast.writable_parameters("weights")
    frozen = np.frombuffer(bytes(16), dtype=np.float32)
    with pytest.raises(ValueError, match="read-only"):
        with rnnfast.writable_parameters(frozen):
            pass


def test_optimizers_take_read_only_parameters_but_not_read_only_memory():
    layer = rnnfast.LSTM(D, H, seed=0)
    optim.SGD(layer, lr=0.1)  # read-only arrays whose memory is writeable: accepted
    frozen = np.frombuffer(bytes(16), dtype=np.float32)
    with pytest.raises(ValueError, match=r"params\[0\].*read-only"):
        optim.SGD([(frozen, np.zeros(4, np.float32))], lr=0.1)


def test_a_failed_load_state_dict_leaves_values_and_packs_as_they_were():
    layer = LAYERS["gru"]()
    before = _train_step(layer)
    made = _packs_made(layer)
    bad = {**layer.state_dict(), "weight_hh_l0": np.zeros((2, 2))}
    with pytest.raises(ValueError, match="weight_hh_l0"):
        layer.load_state_dict(bad)
    _assert_same(_train_step(layer), before)
    assert _packs_made(layer) == made


def test_finite_differences_inside_a_writable_block_see_the_written_values():
    layer = rnnfast.LSTM(3, 4, num_layers=2, bidirectional=True, seed=0, dtype=np.float64)
    x = np.random.default_rng(1).standard_normal((4, 2, 3))
    y, _ = layer(x)  # fills the caches
    R = np.random.default_rng(2).standard_normal(y.shape)
    layer.backward(R)

    def loss():
        return float(np.sum(layer(x)[0] * R))

    for name in ("weight_hh_l1_reverse", "weight_ih_l0"):
        numeric = numerical_gradient(loss, layer._params[name])
        np.testing.assert_allclose(layer.grads[name], numeric, rtol=1e-5, atol=1e-7)


def test_weight_cache_names_a_direction_out_of_range():
    layer = rnnfast.RNN(D, H, num_layers=2, seed=0)
    with pytest.raises(ValueError, match="direction"):
        layer._weight_cache(0, 1)
    with pytest.raises(ValueError, match="k=2"):
        layer._weight_cache(2, 0)
    assert layer._weight_cache(1, 0) is layer._weight_cache(1, 0)


# ---- the functional keyword ----------------------------------------------------------------------


def test_functional_weight_cache_reuses_packs_and_names_a_wrong_type():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((T, B, D)).astype(np.float32)
    w_ih = rng.standard_normal((3 * H, D)).astype(np.float32)
    w_hh = rng.standard_normal((3 * H, H)).astype(np.float32)
    cache = functional.WeightCache()
    first = functional.gru_forward(x, w_ih, w_hh, weight_cache=cache)
    made = cache.packs_made
    assert made > 0
    np.testing.assert_array_equal(
        functional.gru_forward(x, w_ih, w_hh, weight_cache=cache).y, first.y
    )
    assert cache.packs_made == made
    # a weight converted for the call (a copy at a new address each time) bypasses it
    functional.gru_forward(x, np.asfortranarray(w_ih), w_hh, weight_cache=cache)
    assert cache.packs_made == made
    with pytest.raises(TypeError, match="weight_cache.*dict"):
        functional.rnn_forward(x, w_ih[:H], w_hh[:H], weight_cache={})
