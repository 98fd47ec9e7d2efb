"""Linear (Dense), Embedding, Dropout and Sequential: gradients by finite differences in float64,
parity with torch.nn, the layer protocol (accumulating grads, modes, state dicts), bad input,
persistence and Keras's parameter counts in Sequential.summary.

Finite differences: the loss is L = sum(out * R) with a fixed random R (or a cross-entropy), so
its gradient is the backward from d_out = R.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import DTYPES, assert_close, numerical_gradient

import rnnfast
from rnnfast import Dense, Dropout, Embedding, Linear, Sequential
from rnnfast.losses import cross_entropy

FD_RTOL = 1e-6
FD_ATOL = 1e-8
SIZES = [1, 3, 17]


def assert_fd_close(analytic, numeric, what):
    np.testing.assert_allclose(analytic, numeric, rtol=FD_RTOL, atol=FD_ATOL, err_msg=what)


def _params_snapshot(model):
    return {k: v.copy() for k, v in model.state_dict().items()}


def _assert_same_params(model, snapshot):
    current = model.state_dict()
    assert current.keys() == snapshot.keys()
    for k in snapshot:
        np.testing.assert_array_equal(current[k], snapshot[k], err_msg=k)


# ---- finite differences in float64 ------------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("out_features", SIZES)
@pytest.mark.parametrize("in_features", SIZES)
@pytest.mark.parametrize("lead", [(4,), (3, 2), (1,)], ids=["BD", "TBD", "B1"])
def test_linear_gradients_fd(lead, in_features, out_features, bias, rng):
    layer = Linear(in_features, out_features, bias=bias, dtype=np.float64, seed=1)
    x = rng.standard_normal(lead + (in_features,))
    R = rng.standard_normal(lead + (out_features,))

    y = layer(x)
    assert y.shape == lead + (out_features,)
    expected = x @ layer.named_parameters()[0][1].T
    if bias:
        expected = expected + layer.parameters()[1]
    assert_close(y, expected, np.float64, "y")
    dx = layer.backward(R)
    assert dx.shape == x.shape

    def loss():
        return float(np.sum(layer(x) * R))

    assert_fd_close(dx, numerical_gradient(loss, x), "dx")
    params = dict(layer.named_parameters())
    assert sorted(params) == (["bias", "weight"] if bias else ["weight"])
    for name, p in params.items():
        assert_fd_close(layer.grads[name], numerical_gradient(loss, p), name)


@pytest.mark.parametrize("ids_shape", [(6,), (4, 3), (2, 3, 2)])
@pytest.mark.parametrize("num_embeddings,embedding_dim", [(1, 3), (3, 1), (5, 4), (17, 3)])
def test_embedding_gradient_fd_with_repeated_ids(num_embeddings, embedding_dim, ids_shape, rng):
    layer = Embedding(num_embeddings, embedding_dim, dtype=np.float64, seed=2)
    ids = rng.integers(0, num_embeddings, size=ids_shape)
    ids.flat[0] = ids.flat[-1] = 0  # at least one id repeated
    R = rng.standard_normal(ids_shape + (embedding_dim,))

    out = layer(ids)
    np.testing.assert_array_equal(out, layer.parameters()[0][ids])
    assert layer.backward(R) is None

    expected = np.zeros((num_embeddings, embedding_dim))
    for i, row in zip(ids.ravel(), R.reshape(-1, embedding_dim)):
        expected[i] += row
    assert_close(layer.grads["weight"], expected, np.float64, "dweight (loop)")

    def loss():
        return float(np.sum(layer(ids) * R))

    assert_fd_close(
        layer.grads["weight"], numerical_gradient(loss, layer.parameters()[0]), "dweight"
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [0.0, 0.2, 0.5, 0.9])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (4, 2, 3)])
def test_dropout_backward_is_mask_times_d(shape, p, dtype, rng):
    ones = np.ones(shape, dtype=dtype)
    mask = Dropout(p, seed=11, dtype=dtype)(ones)  # the mask the seed draws first
    kept = mask != 0
    if p > 0:
        np.testing.assert_allclose(mask[kept], 1.0 / (1.0 - p), rtol=1e-6)
    else:
        np.testing.assert_array_equal(mask, 1)

    layer = Dropout(p, seed=11, dtype=dtype)
    x = rng.standard_normal(shape).astype(dtype)
    d = rng.standard_normal(shape).astype(dtype)
    y = layer(x)
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, x * mask)
    dx = layer.backward(d)
    assert dx.dtype == dtype
    np.testing.assert_array_equal(dx, d * mask)


def test_dropout_fd_with_fixed_seed(rng):
    x = rng.standard_normal((5, 4))
    R = rng.standard_normal((5, 4))
    layer = Dropout(0.3, seed=5, dtype=np.float64)
    layer(x)
    dx = layer.backward(R)

    def loss():
        return float(np.sum(Dropout(0.3, seed=5, dtype=np.float64)(x) * R))

    assert_fd_close(dx, numerical_gradient(loss, x), "dx")


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_keeps_about_one_minus_p_and_masks_repeat(p):
    x = np.ones((200, 100), dtype=np.float32)
    a = Dropout(p, seed=3)(x)
    assert abs(np.mean(a == 0) - p) < 0.02
    np.testing.assert_allclose(np.mean(a), 1.0, atol=0.05)  # inverted dropout keeps the mean
    np.testing.assert_array_equal(a, Dropout(p, seed=3)(x))
    layer = Dropout(p, seed=3)
    first, second = layer(x), layer(x)
    assert not np.array_equal(first, second)  # a fresh mask per call


def _sequence_model(p, *, V=7, E=3, H=5, seed=0):
    return Sequential(
        [
            Embedding(V, E, dtype=np.float64, seed=seed),
            rnnfast.RNN(
                E, H, return_sequences=True, batch_first=True, dtype=np.float64, seed=seed + 1
            ),
            Dropout(p, seed=42, dtype=np.float64),
            Linear(H, V, dtype=np.float64, seed=seed + 2),
        ]
    )


@pytest.mark.parametrize("p", [0.0, 0.4], ids=["p0", "p0.4-fixed-seed"])
@pytest.mark.parametrize("lengths", [False, True], ids=["full", "ignore-padding"])
def test_sequential_gradients_fd_with_cross_entropy(p, lengths, rng):
    B, T, V = 3, 4, 7
    model = _sequence_model(p, V=V)
    ids = rng.integers(0, V, size=(B, T))
    targets = rng.integers(0, V, size=(B, T))
    kw = {"lengths": np.array([4, 2, 3]), "batch_first": True} if lengths else {}

    def loss():
        model.layers[2] = Dropout(p, seed=42, dtype=np.float64)  # the same mask every time
        loss, _ = cross_entropy(model(ids), targets, **kw)
        return loss

    model.zero_grad()
    model.layers[2] = Dropout(p, seed=42, dtype=np.float64)
    logits = model(ids)
    assert logits.shape == (B, T, V)
    value, d_logits = cross_entropy(logits, targets, **kw)
    assert model.backward(d_logits) is None  # the Embedding's ids have no gradient
    assert value == pytest.approx(loss(), rel=1e-14)

    grads = model.grads
    names = [name for name, _ in model.named_parameters()]
    assert sorted(grads) == sorted(names)
    assert set(names) == {
        "0.weight",
        "1.weight_ih_l0",
        "1.weight_hh_l0",
        "1.bias_ih_l0",
        "1.bias_hh_l0",
        "3.weight",
        "3.bias",
    }
    analytic = {k: g.copy() for k, g in grads.items()}
    for name, param in model.named_parameters():
        assert_fd_close(analytic[name], numerical_gradient(loss, param), name)


# ---- parity with torch.nn ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("lead", [(5,), (4, 3)], ids=["BD", "TBD"])
@pytest.mark.parametrize("in_features,out_features", [(1, 1), (3, 17), (33, 100)])
def test_linear_matches_torch(torch, in_features, out_features, lead, bias, dtype, rng):
    tdtype = torch.float64  # the oracle in float64 on the same float32-valued inputs
    ref = torch.nn.Linear(in_features, out_features, bias=bias, dtype=tdtype)
    layer = Linear(in_features, out_features, bias=bias, dtype=dtype)
    layer.load_state_dict(ref.state_dict())
    for name, p in ref.state_dict().items():
        np.testing.assert_array_equal(layer.state_dict()[name], p.numpy().astype(dtype))
    # make the oracle's weights exactly the layer's (float32-rounded) values
    ref.load_state_dict(
        {k: torch.from_numpy(v.astype(np.float64)) for k, v in layer.state_dict().items()}
    )

    x = rng.standard_normal(lead + (in_features,)).astype(dtype)
    dy = rng.standard_normal(lead + (out_features,)).astype(dtype)
    tx = torch.tensor(x.astype(np.float64), requires_grad=True)
    ty = ref(tx)
    ty.backward(torch.from_numpy(dy.astype(np.float64)))

    assert_close(layer(x), ty.detach().numpy(), dtype, "y")
    assert_close(layer.backward(dy), tx.grad.numpy(), dtype, "dx")
    for name, p in ref.named_parameters():
        assert_close(layer.grads[name], p.grad.numpy(), dtype, name)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ids_shape", [(7,), (5, 3)])
@pytest.mark.parametrize("num_embeddings,embedding_dim", [(1, 1), (4, 17), (100, 33)])
def test_embedding_matches_torch(torch, num_embeddings, embedding_dim, ids_shape, dtype, rng):
    ref = torch.nn.Embedding(num_embeddings, embedding_dim, dtype=torch.float64)
    layer = Embedding(num_embeddings, embedding_dim, dtype=dtype)
    layer.load_state_dict(ref.state_dict())
    ref.load_state_dict(
        {"weight": torch.from_numpy(layer.state_dict()["weight"].astype(np.float64))}
    )
    ids = rng.integers(0, min(num_embeddings, 3), size=ids_shape)  # many repeats
    d = rng.standard_normal(ids_shape + (embedding_dim,)).astype(dtype)
    out = ref(torch.from_numpy(ids))
    out.backward(torch.from_numpy(d.astype(np.float64)))

    assert_close(layer(ids), out.detach().numpy(), dtype, "out")
    layer.backward(d)
    assert_close(layer.grads["weight"], ref.weight.grad.numpy(), dtype, "dweight")


# ---- the layer protocol -------------------------------------------------------------------------


def _layers_and_inputs(rng):
    """(name, layer, input, d_out) for each layer kind, float64."""
    x = rng.standard_normal((4, 3))
    ids = rng.integers(0, 5, size=(4, 3))
    return [
        ("linear", Linear(3, 2, dtype=np.float64, seed=0), x, rng.standard_normal((4, 2))),
        (
            "embedding",
            Embedding(5, 2, dtype=np.float64, seed=0),
            ids,
            rng.standard_normal((4, 3, 2)),
        ),
        ("dropout", Dropout(0.5, seed=0, dtype=np.float64), x, rng.standard_normal((4, 3))),
    ]


@pytest.mark.parametrize("kind", ["linear", "embedding", "dropout"])
def test_grads_accumulate_and_zero_grad_resets(kind, rng):
    _, layer, x, d = next(t for t in _layers_and_inputs(rng) if t[0] == kind)
    layer(x)
    layer.backward(d)
    once = {k: g.copy() for k, g in layer.grads.items()}
    layer(x)
    layer.backward(d)
    for k, g in layer.grads.items():
        np.testing.assert_allclose(g, 2 * once[k], rtol=1e-15, err_msg=k)
    live = dict(layer.grads)
    layer.zero_grad()
    for k, g in layer.grads.items():
        assert g is live[k]  # reset in place: optimizers may hold the arrays
        assert not np.any(g)
    assert [k for k, _ in layer.named_parameters()] == list(layer.grads)


def test_sequential_grads_accumulate_and_zero_grad_resets(rng):
    model = _sequence_model(0.0)
    ids = rng.integers(0, 7, size=(2, 3))
    d = rng.standard_normal((2, 3, 7))
    model(ids)
    model.backward(d)
    once = {k: g.copy() for k, g in model.grads.items()}
    assert all(np.any(g) for g in once.values())
    model(ids)
    model.backward(d)
    for k, g in model.grads.items():
        np.testing.assert_allclose(g, 2 * once[k], rtol=1e-12, atol=1e-15, err_msg=k)
    model.zero_grad()
    assert not any(np.any(g) for g in model.grads.values())


@pytest.mark.parametrize("kind", ["linear", "embedding", "dropout"])
def test_eval_keeps_no_cache_and_backward_needs_a_training_forward(kind, rng):
    _, layer, x, d = next(t for t in _layers_and_inputs(rng) if t[0] == kind)
    with pytest.raises(RuntimeError, match="backward"):
        layer.backward(d)  # no forward yet
    layer(x)
    layer.backward(d)
    with pytest.raises(RuntimeError, match="backward"):
        layer.backward(d)  # one backward per forward

    layer(x)
    assert layer.eval() is layer and not layer.training
    with pytest.raises(RuntimeError, match="backward"):
        layer.backward(d)  # eval() dropped the training forward's cache
    before = {k: g.copy() for k, g in layer.grads.items()}
    layer(x)
    with pytest.raises(RuntimeError, match="backward"):
        layer.backward(d)
    for k, g in layer.grads.items():
        np.testing.assert_array_equal(g, before[k])
    assert layer.train() is layer and layer.training
    layer(x)
    layer.backward(d)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dropout_is_the_identity_in_eval(dtype, rng):
    layer = Dropout(0.9, seed=0, dtype=dtype).eval()
    x = rng.standard_normal((6, 5)).astype(dtype)
    y = layer(x)
    np.testing.assert_array_equal(y, x)
    assert y is not x and y.dtype == dtype
    model = _sequence_model(0.9).eval()
    ids = rng.integers(0, 7, size=(2, 3))
    a = model(ids)
    np.testing.assert_array_equal(a, model(ids))  # deterministic: no masks in eval


def test_sequential_eval_keeps_no_cache(rng):
    model = _sequence_model(0.3)
    ids = rng.integers(0, 7, size=(2, 3))
    model(ids)
    model.eval()
    assert not model.training and not any(layer.training for layer in model.layers)
    with pytest.raises(RuntimeError):
        model.backward(np.zeros((2, 3, 7)))
    model(ids)
    with pytest.raises(RuntimeError):
        model.backward(np.zeros((2, 3, 7)))
    model.train()
    assert all(layer.training for layer in model.layers)
    model(ids)
    model.backward(np.zeros((2, 3, 7)))


# ---- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(4, 2), (4, 4), (3, 2, 5), (0,)])
def test_linear_wrong_last_dim_names_x_and_the_shape(shape):
    layer = Linear(3, 2)
    with pytest.raises(
        ValueError, match=r"x:.*" + str(shape).replace("(", r"\(").replace(")", r"\)")
    ):
        layer(np.zeros(shape, dtype=np.float32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_mismatch_is_type_error(dtype):
    other = np.float64 if dtype == np.float32 else np.float32
    with pytest.raises(TypeError, match=np.dtype(other).name):
        Linear(3, 2, dtype=dtype)(np.zeros((2, 3), dtype=other))
    with pytest.raises(TypeError, match=np.dtype(other).name):
        Dropout(0.5, dtype=dtype)(np.zeros((2, 3), dtype=other))
    for bad in (np.zeros((2, 3), dtype=np.int64), np.zeros((2, 3), dtype=object)):
        with pytest.raises(TypeError):
            Linear(3, 2, dtype=dtype)(bad)


@pytest.mark.parametrize(
    "ids", [np.zeros(3, dtype=np.float32), np.zeros(3), np.zeros(3, dtype=bool), [0.0, 1.0]]
)
def test_embedding_float_ids_are_type_error(ids):
    with pytest.raises(TypeError, match="ids"):
        Embedding(4, 2)(ids)


@pytest.mark.parametrize("bad", [-1, 4, 100])
def test_embedding_out_of_range_ids_are_value_error(bad):
    layer = Embedding(4, 2)
    ids = np.array([[0, 1], [2, bad]])
    with pytest.raises(ValueError, match=r"ids.*\[0, 4\)"):
        layer(ids)
    with pytest.raises(RuntimeError):
        layer.backward(np.zeros((2, 2, 2), dtype=np.float32))  # the failed call cached nothing


def test_embedding_accepts_any_integer_dtype_and_empty_ids():
    layer = Embedding(4, 2, seed=0)
    w = layer.parameters()[0]
    for dt in (np.int8, np.uint8, np.int32, np.uint64):
        np.testing.assert_array_equal(layer(np.array([3, 0], dtype=dt)), w[[3, 0]])
    assert layer(np.zeros((0, 3), dtype=np.int64)).shape == (0, 3, 2)


def test_wrong_backward_shape_keeps_the_forward_for_a_retry(rng):
    layer = Linear(3, 2, dtype=np.float64)
    x = rng.standard_normal((4, 3))
    layer(x)
    with pytest.raises(ValueError, match="dy"):
        layer.backward(np.zeros((4, 3)))
    assert not np.any(layer.grads["weight"])
    layer.backward(np.ones((4, 2)))
    emb = Embedding(5, 2, dtype=np.float64)
    emb(np.array([1, 2]))
    with pytest.raises(ValueError, match="d_out"):
        emb.backward(np.zeros((2, 3)))
    assert not np.any(emb.grads["weight"])
    emb.backward(np.ones((2, 2)))
    for p in (0.0, 0.5):  # the mask must not broadcast a wrong d_out
        drop = Dropout(p, dtype=np.float64)
        drop(np.ones((2, 3)))
        for shape in [(1, 3), (3,), (5,), (2, 3, 1)]:
            with pytest.raises(ValueError, match=r"d_out.*\(2, 3\)"):
                drop.backward(np.ones(shape))
        assert drop.backward(np.ones((2, 3))).shape == (2, 3)


@pytest.mark.parametrize(
    "cls,args",
    [
        (Linear, (0, 2)),
        (Linear, (2, -1)),
        (Embedding, (0, 2)),
    ],
)
def test_bad_sizes_are_value_error(cls, args):
    with pytest.raises(ValueError):
        cls(*args)


@pytest.mark.parametrize("cls,args", [(Linear, (2.0, 2)), (Embedding, (True, 2))])
def test_sizes_that_are_not_ints_are_type_error(cls, args):
    with pytest.raises(TypeError, match="expected an int"):
        cls(*args)


@pytest.mark.parametrize("p", [-0.1, 1.0001, 1.5, True, "0.5", None])
def test_dropout_bad_p_is_value_error(p):
    with pytest.raises(ValueError, match="p"):
        Dropout(p)


def test_bad_dtype_is_type_error():
    for cls, args in ((Linear, (2, 2)), (Embedding, (2, 2))):
        with pytest.raises(TypeError, match="dtype"):
            cls(*args, dtype=np.int32)
    with pytest.raises(TypeError, match="dtype"):
        Dropout(0.5, dtype=np.float16)


def test_sequential_rejects_non_layers():
    with pytest.raises(TypeError, match=r"layers\[1\]"):
        Sequential([Linear(2, 2), "relu"])


# ---- state dicts --------------------------------------------------------------------------------


def _models():
    return {
        "linear": lambda: Linear(3, 2, seed=0),
        "linear-nobias": lambda: Linear(3, 2, bias=False, seed=0),
        "embedding": lambda: Embedding(5, 3, seed=0),
        "sequential": lambda: _sequence_model(0.2),
    }


def _bad_state_dicts(good):
    first = next(iter(good))
    missing = dict(good)
    del missing[first]
    extra = dict(good, unexpected=np.zeros(2))
    misshaped = dict(good)
    misshaped[first] = np.zeros(good[first].shape + (1,))
    transposed = dict(good)
    transposed[first] = np.zeros(good[first].shape[::-1] if good[first].ndim == 2 else (99,))
    return {
        "missing": (missing, first),
        "extra": (extra, "unexpected"),
        "misshaped": (misshaped, first),
        "other-shape": (transposed, first),
    }


@pytest.mark.parametrize("case", ["missing", "extra", "misshaped", "other-shape"])
@pytest.mark.parametrize("kind", ["linear", "linear-nobias", "embedding", "sequential"])
def test_load_state_dict_rejects_bad_keys_and_shapes_and_changes_nothing(kind, case):
    model = _models()[kind]()
    good = {k: v + 1 for k, v in model.state_dict().items()}
    bad, key = _bad_state_dicts(good)[case]
    before = _params_snapshot(model)
    with pytest.raises(ValueError, match=key):
        model.load_state_dict(bad)
    _assert_same_params(model, before)
    model.load_state_dict(good)
    _assert_same_params(model, good)


@pytest.mark.parametrize(
    "bad",
    [np.array(["a", "b"]), np.array([1 + 1j, 2]), np.array([None, None])],
    ids=["str", "complex", "object"],
)
@pytest.mark.parametrize("kind", ["linear", "sequential"])
def test_load_state_dict_rejects_non_real_values_and_changes_nothing(kind, bad):
    model = _models()[kind]()
    good = {k: v + 1 for k, v in model.state_dict().items()}
    key = "bias" if kind == "linear" else "3.bias"  # the last key: the others would load first
    assert list(good)[-1] == key
    good[key] = np.resize(bad, good[key].shape)
    before = _params_snapshot(model)
    with pytest.raises(TypeError, match="bias"):
        model.load_state_dict(good)
    _assert_same_params(model, before)


@pytest.mark.parametrize("dtype", DTYPES)
def test_load_state_dict_takes_other_real_dtypes_and_torch_tensors(torch, dtype):
    layer = Linear(2, 2, dtype=dtype)
    layer.load_state_dict(
        {
            "weight": np.arange(4, dtype=np.int64).reshape(2, 2),
            "bias": torch.tensor([0.5, 1.5], dtype=torch.float64),
        }
    )
    sd = layer.state_dict()
    assert sd["weight"].dtype == dtype and sd["bias"].dtype == dtype
    np.testing.assert_array_equal(sd["weight"], [[0, 1], [2, 3]])
    np.testing.assert_array_equal(sd["bias"], [0.5, 1.5])


def test_sequential_state_dict_names_and_copies():
    model = _sequence_model(0.2)
    sd = model.state_dict()
    assert list(sd) == [name for name, _ in model.named_parameters()]
    sd["3.bias"][...] = 123.0  # a copy
    assert not np.any(model.state_dict()["3.bias"] == 123.0)
    assert model.keras_param_count() == 7 * 3 + (3 * 5 + 5 * 5 + 5) + 0 + (5 * 7 + 7)


# ---- persistence ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["linear", "linear-nobias", "embedding", "dropout"])
def test_save_load_round_trip_of_each_layer(tmp_path, kind, dtype, rng):
    x = rng.standard_normal((3, 4, 3)).astype(dtype)
    layer, inp = {
        "linear": (Linear(3, 5, dtype=dtype, seed=1), x),
        "linear-nobias": (Linear(3, 5, bias=False, dtype=dtype, seed=1), x),
        "embedding": (Embedding(6, 4, dtype=dtype, seed=1), rng.integers(0, 6, size=(3, 4))),
        "dropout": (Dropout(0.3, seed=1, dtype=dtype), x),
    }[kind]
    # parameters not the seed's: the file must hold the values
    layer.load_state_dict({k: rng.standard_normal(v.shape) for k, v in layer.state_dict().items()})
    path = tmp_path / "layer.npz"
    rnnfast.save(layer, path)
    loaded = rnnfast.load(path)
    assert type(loaded) is type(layer)
    assert loaded.get_config() == layer.get_config()
    assert loaded.training
    sd, loaded_sd = layer.state_dict(), loaded.state_dict()
    assert loaded_sd.keys() == sd.keys()
    for k in sd:
        assert loaded_sd[k].dtype == dtype
        np.testing.assert_array_equal(loaded_sd[k], sd[k])
    layer.eval()
    loaded.eval()
    np.testing.assert_array_equal(loaded(inp), layer(inp))
    if kind == "dropout":  # the seed is kept: a fresh layer draws the same masks
        np.testing.assert_array_equal(loaded.train()(inp), Dropout(0.3, seed=1, dtype=dtype)(inp))


@pytest.mark.parametrize("dtype", DTYPES)
def test_save_load_round_trip_of_a_sequential_with_an_rnn(tmp_path, dtype, rng):
    model = Sequential(
        [
            Embedding(9, 4, dtype=dtype, seed=0),
            rnnfast.RNN(
                4,
                6,
                num_layers=2,
                nonlinearity="relu",
                return_sequences=True,
                batch_first=True,
                dtype=dtype,
                seed=1,
            ),
            Dropout(0.25, seed=2, dtype=dtype),
            rnnfast.RNN(6, 5, return_sequences=False, batch_first=True, dtype=dtype, seed=3),
            Dense(5, 3, dtype=dtype, seed=4),
        ]
    )
    ids = rng.integers(0, 9, size=(2, 7))
    model.save(tmp_path / "model.npz")
    rnnfast.save(model, tmp_path / "model2.npz")
    for name in ("model.npz", "model2.npz"):
        loaded = rnnfast.load(tmp_path / name)
        assert isinstance(loaded, Sequential) and len(loaded) == len(model)
        assert [type(a) for a in loaded.layers] == [type(b) for b in model.layers]
        assert loaded[1].return_sequences is True and loaded[3].return_sequences is False
        sd = model.state_dict()
        assert loaded.state_dict().keys() == sd.keys()
        for k, v in loaded.state_dict().items():
            np.testing.assert_array_equal(v, sd[k], err_msg=k)
        out = model.eval()(ids)
        assert out.shape == (2, 3)
        np.testing.assert_array_equal(loaded.eval()(ids), out)
        model.train()


# ---- Keras's parameter counts ------------------------------------------------------------------


def _rows(text):
    """The table's layer rows: ``name_i (Type)   shape   count``."""
    return [line for line in text.splitlines() if re.match(r"^\w+_\d+ \(\w+\)", line)]


def test_summary_matches_keras_counts_for_the_sunspots_model(capsys):
    RNN = rnnfast.RNN
    model = Sequential(
        [
            RNN(1, 50, return_sequences=True, batch_first=True),
            Dropout(0.2),
            RNN(50, 100, return_sequences=False, batch_first=True),
            Dropout(0.2),
            Dense(100, 1),
        ]
    )
    text = model.summary((24, 1))
    assert capsys.readouterr().out.strip() == text.strip()
    rows = _rows(text)
    assert len(rows) == 5
    counts = [row.split()[-1] for row in rows]
    assert counts == ["2,600", "0", "15,100", "0", "101"]
    shapes = ["(None, 24, 50)", "(None, 24, 50)", "(None, 100)", "(None, 100)", "(None, 1)"]
    for row, shape in zip(rows, shapes):
        assert shape in row, (row, shape)
    assert "Total params: 17,801" in text
    assert model.keras_param_count() == 17_801
    # rnnfast stores PyTorch's two bias vectors per RNN
    assert sum(p.size for p in model.parameters()) == 17_801 + 50 + 100


def test_summary_matches_keras_counts_for_a_second_model():
    RNN = rnnfast.RNN
    model = Sequential(
        [
            RNN(8, 64, return_sequences=True, batch_first=True),
            RNN(64, 32, return_sequences=False, batch_first=True),
            Dense(32, 10),
        ]
    )
    text = model.summary((None, 8))
    counts = [row.split()[-1] for row in _rows(text)]
    assert counts == ["4,672", "3,104", "330"]
    assert [layer.keras_param_count() for layer in model.layers] == [4672, 3104, 330]
    assert "Total params: 8,106" in text
    assert "(None, None, 64)" in text and "(None, 32)" in text and "(None, 10)" in text


def test_summary_without_input_shape():
    model = Sequential([Linear(4, 3), Dropout(0.1), Dense(3, 2)])
    text = model.summary()
    assert "Total params: 23" in text
    assert "Stored" not in text  # no RNN: the layouts agree


@pytest.mark.parametrize("dy_layout", ["contiguous", "time_major"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_on_a_time_major_view_equals_a_copy(dtype, dy_layout, rng):
    """A (B, T, F) view of (T, B, F) memory (a batch_first RNN's output) is read in place; the
    output, dx and the gradients equal those of the same values laid out batch-first."""
    base = rng.standard_normal((5, 3, 4)).astype(dtype)  # (T, B, F) in memory
    view = base.swapaxes(0, 1)  # (B, T, F)
    d = rng.standard_normal((3, 5, 6)).astype(dtype)
    if dy_layout == "time_major":
        d = np.ascontiguousarray(d.swapaxes(0, 1)).swapaxes(0, 1)
    layers = [Linear(4, 6, dtype=dtype, seed=1) for _ in range(2)]
    outs = [layers[0](view), layers[1](np.ascontiguousarray(view))]
    dxs = [layer.backward(d) for layer in layers]
    assert outs[0].shape == outs[1].shape == (3, 5, 6)
    # the rows meet the GEMM's register tiles in another order: equal to rounding
    assert_close(outs[0], outs[1], dtype, "y")
    assert_close(dxs[0], dxs[1], dtype, "dx")
    assert dxs[0].shape == view.shape
    for k in layers[0].grads:
        assert_close(layers[0].grads[k], layers[1].grads[k], dtype, k)


def test_linear_trusts_read_only_input_but_copies_writable_input(rng):
    """Training keeps x for backward: a writable input is copied (the caller may change it),
    a read-only one (how rnnfast layers hand out training outputs) is kept as it is."""
    x = rng.standard_normal((4, 3))
    layer = Linear(3, 2, dtype=np.float64, seed=0)
    d = rng.standard_normal((4, 2))
    layer(x)
    x_before = x.copy()
    x += 1.0  # the caller reuses its array between forward and backward
    layer.backward(d)
    want = Linear(3, 2, dtype=np.float64, seed=0)
    want(x_before)
    want.backward(d)
    np.testing.assert_array_equal(layer.grads["weight"], want.grads["weight"])
    frozen = x_before.copy()
    frozen.flags.writeable = False
    layer(frozen)
    assert np.shares_memory(layer._cache[0], frozen)


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_gradient_adds_rows_in_order_whatever_the_threads(dtype, restore_threads, rng):
    """The C++ scatter adds each id's rows in the ids' order: equal to a sequential loop, bit
    for bit, at any thread count."""
    ids = rng.integers(0, 7, size=(40, 25))
    d_out = rng.standard_normal((40, 25, 50)).astype(dtype)
    want = np.zeros((7, 50), dtype)
    for i, row in zip(ids.ravel(), d_out.reshape(-1, 50)):
        want[i] += row
    for n in (1, 2, 3):
        rnnfast.set_num_threads(n)
        layer = Embedding(7, 50, dtype=dtype, seed=0)
        layer(ids)
        layer.backward(d_out)
        assert np.array_equal(layer.grads["weight"], want)


def test_embedding_gradient_kernel_refuses_bad_ids():
    from rnnfast import _core

    grad = np.zeros((3, 2))
    with pytest.raises(ValueError, match="ids"):
        _core.embedding_backward(np.array([0, 3]), np.ones((2, 2)), grad)
    with pytest.raises(TypeError, match="ids"):
        _core.embedding_backward(np.array([0, 1], np.int32), np.ones((2, 2)), grad)
    assert not grad.any()
