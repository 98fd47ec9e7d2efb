"""Conformance with torch.nn.RNN / torch.nn.Dropout and Keras (issue 12): strict flags, options
checked on assignment, dropout = 1, unbatched input, a repr that shows every option, dtype
errors that give the fix, and Keras's merge_mode=None. torch (and Keras) are the oracles
wherever they have the behaviour."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import DTYPES, assert_close

import rnnfast
from rnnfast import Dropout, Embedding, Linear, interop

T, B, D, H = 5, 3, 4, 6
F32, F64 = np.float32, np.float64


# ---- helpers -------------------------------------------------------------------------------------


def _torch_dtype(torch, dtype):
    return torch.float64 if np.dtype(dtype) == F64 else torch.float32


def _torch_twin(torch, layer, **extra):
    """A torch.nn.RNN with ``layer``'s configuration and weights, in its mode (torch's own
    dropout warning for one layer is expected and not under test here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        module = torch.nn.RNN(
            layer.input_size,
            layer.hidden_size,
            num_layers=layer.num_layers,
            nonlinearity=layer.nonlinearity,
            bias=layer.bias,
            batch_first=layer.batch_first,
            dropout=layer.dropout,
            bidirectional=layer.bidirectional,
            **extra,
        )
    module = module.to(_torch_dtype(torch, layer.dtype))
    with torch.no_grad():
        module.load_state_dict({k: torch.from_numpy(v) for k, v in layer.state_dict().items()})
    return module.train(layer.training)


def _leaf(torch, a):
    return torch.from_numpy(np.array(a)).requires_grad_(True)


def _torch_grads(module):
    return {k: p.grad.numpy() for k, p in module.named_parameters()}


def _assert_grads(layer, module, dtype):
    for k, g in _torch_grads(module).items():
        assert_close(layer.grads[k], g, dtype, k)


# ---- 1. flags are bools --------------------------------------------------------------------------

RNN_FLAGS = [
    "bias",
    "batch_first",
    "bidirectional",
    "residual",
    "go_backwards",
    "stateful",
    "return_sequences",
    "return_state",
]
NOT_BOOLS = ["False", "True", 0, 1, 1.0, [True]]


def _flag_kwargs(flag, value):
    kw = {flag: value}
    if flag == "residual":
        kw["num_layers"] = 2  # residual=True needs a stack: only the type is under test
    return kw


@pytest.mark.parametrize("value", NOT_BOOLS, ids=repr)
@pytest.mark.parametrize("flag", RNN_FLAGS)
def test_rnn_flag_that_is_not_a_bool_is_a_type_error(flag, value):
    with pytest.raises(
        TypeError, match=rf"{flag}: expected a bool( or None)?, got .*\({type(value).__name__}\)"
    ):
        rnnfast.RNN(D, H, **_flag_kwargs(flag, value))


@pytest.mark.parametrize("value", ["False", 0, "True"], ids=repr)
@pytest.mark.parametrize("flag", ["bias", "batch_first"])
def test_torch_raises_the_same_type_error(torch, flag, value):
    with pytest.raises(TypeError, match=f"{flag} should be of type bool"):
        torch.nn.RNN(D, H, **{flag: value})
    with pytest.raises(TypeError, match=f"{flag}: expected a bool, got {value!r}"):
        rnnfast.RNN(D, H, **{flag: value})


def test_the_message_names_the_bool_meant():
    with pytest.raises(TypeError, match=r"pass batch_first=False"):
        rnnfast.RNN(D, H, batch_first="False")
    with pytest.raises(TypeError, match=r"pass bias=True"):
        rnnfast.RNN(D, H, bias=1)


@pytest.mark.parametrize("flag", RNN_FLAGS)
def test_numpy_bools_are_bools(flag):
    for value in (np.True_, np.False_):
        layer = rnnfast.RNN(D, H, **_flag_kwargs(flag, value))
        assert getattr(layer, flag) is bool(value)


def test_numpy_bool_bias_builds_torchs_parameters(torch):
    layer = rnnfast.RNN(D, H, bias=np.False_)
    assert list(layer.state_dict()) == list(torch.nn.RNN(D, H, bias=False).state_dict())


def test_return_flags_keep_none():
    layer = rnnfast.RNN(D, H, return_sequences=None, return_state=None)
    assert layer.return_sequences is None and layer.return_state is None


@pytest.mark.parametrize("value", NOT_BOOLS + [None], ids=repr)
def test_linear_bias_that_is_not_a_bool_is_a_type_error(value):
    with pytest.raises(TypeError, match="bias: expected a bool, got "):
        Linear(D, H, bias=value)
    assert "bias" not in Linear(D, H, bias=np.False_).state_dict()


# ---- 2. options assigned after construction ------------------------------------------------------

BAD_ASSIGNMENTS = [
    ("dropout", 1.5, ValueError),
    ("dropout", -0.1, ValueError),
    ("dropout", "0.1", ValueError),
    ("nonlinearity", "sigmoid", ValueError),
    ("alpha", 0.0, ValueError),
    ("alpha", [0.5, 0.5], ValueError),
    ("alpha", True, TypeError),
    ("merge_mode", "max", ValueError),
    ("merge_mode", "sum", ValueError),  # the layer is unidirectional
    ("merge_mode", None, ValueError),
    ("residual", True, ValueError),  # one layer
    ("return_sequences", "yes", TypeError),
    ("return_state", 1, TypeError),
    ("batch_first", 1, TypeError),
    ("go_backwards", "False", TypeError),
    ("stateful", 0, TypeError),
    ("residual", 1, TypeError),
]


@pytest.mark.parametrize(
    "name,value,exc", BAD_ASSIGNMENTS, ids=[f"{n}={v!r}" for n, v, _ in BAD_ASSIGNMENTS]
)
def test_bad_assignment_raises_and_changes_nothing(name, value, exc):
    layer = rnnfast.RNN(D, H, seed=0)
    before = getattr(layer, name)
    with pytest.raises(exc, match=name):
        setattr(layer, name, value)
    assert getattr(layer, name) == before


def test_assigned_dropout_above_one_no_longer_trains():
    layer = rnnfast.RNN(D, H, num_layers=2, seed=0)
    with pytest.raises(ValueError, match=r"dropout.*\[0, 1\]"):
        layer.dropout = 1.5


@pytest.mark.parametrize(
    "name", ["input_size", "hidden_size", "num_layers", "bidirectional", "bias", "dtype", "seed"]
)
def test_options_that_shape_the_parameters_are_read_only(name):
    layer = rnnfast.RNN(D, H, seed=0)
    before = getattr(layer, name)
    with pytest.raises(AttributeError, match=rf"{name} is fixed.*build a new layer"):
        setattr(layer, name, before)
    assert getattr(layer, name) == before
    assert rnnfast.RNN(**layer.get_config()).get_config() == layer.get_config()


def test_assigned_options_act_as_constructed_ones(torch, rng):
    x = rng.standard_normal((B, T, D))
    layer = rnnfast.RNN(D, H, num_layers=2, dtype=F64, seed=1)
    layer.nonlinearity = "relu"
    layer.batch_first = True
    module = _torch_twin(torch, layer)
    y, h_n = layer(x)
    y_t, h_t = module(torch.from_numpy(x))
    assert_close(y, y_t.detach().numpy(), F64, "y")
    assert_close(h_n, h_t.detach().numpy(), F64, "h_n")

    keras_like = rnnfast.RNN(D, H, bidirectional=True, dtype=F64, seed=2)
    for name, value in [
        ("merge_mode", "ave"),
        ("return_sequences", False),
        ("alpha", 0.5),
        ("go_backwards", True),
    ]:
        setattr(keras_like, name, value)
    built = rnnfast.RNN(
        D,
        H,
        bidirectional=True,
        dtype=F64,
        seed=2,
        merge_mode="ave",
        return_sequences=False,
        alpha=0.5,
        go_backwards=True,
    )
    np.testing.assert_array_equal(keras_like(x.swapaxes(0, 1)), built(x.swapaxes(0, 1)))
    assert repr(keras_like) == repr(built)


def test_turning_stateful_off_forgets_the_state(rng):
    layer = rnnfast.RNN(D, H, stateful=True, dtype=F64, seed=3)
    layer(rng.standard_normal((T, B, D)))
    assert layer.state is not None
    layer.stateful = False
    assert layer.state is None


ASSIGNED_BETWEEN = [
    ("nonlinearity", "relu"),
    ("alpha", 0.5),
    ("go_backwards", True),
    ("batch_first", True),
    ("merge_mode", "mul"),
    ("return_sequences", False),
    ("residual", False),
]


@pytest.mark.parametrize("name,value", ASSIGNED_BETWEEN, ids=[n for n, _ in ASSIGNED_BETWEEN])
def test_an_option_assigned_between_forward_and_backward_differentiates_the_forward(
    name, value, rng
):
    def make():
        return rnnfast.RNN(
            D,
            H,
            num_layers=2,
            bidirectional=True,
            residual=True,
            return_sequences=True,
            dtype=F64,
            seed=4,
        )

    x = rng.standard_normal((T, B, D))
    dy = rng.standard_normal((T, B, 2 * H))
    want, changed = make(), make()
    want(x)
    dx_want, dh0_want = want.backward(dy)
    changed(x)
    setattr(changed, name, value)
    dx, dh0 = changed.backward(dy)
    np.testing.assert_array_equal(dx, dx_want)
    np.testing.assert_array_equal(dh0, dh0_want)
    for k, g in want.grads.items():
        np.testing.assert_array_equal(changed.grads[k], g, err_msg=k)


def test_dropout_layer_p_is_checked_on_assignment():
    layer = Dropout(0.25, seed=0)
    for bad in (1.5, -0.1, "0.5", True, None):
        with pytest.raises(ValueError, match=r"\bp\b"):
            layer.p = bad
        assert layer.p == 0.25
    layer.p = 1
    assert layer.p == 1.0 and isinstance(layer.p, float)


# ---- 3. dropout = 1, and the one-layer warning ---------------------------------------------------


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("assigned", [False, True], ids=["constructed", "assigned"])
def test_dropout_one_matches_torch(torch, assigned, bidirectional, rng):
    """torch zeroes every between-layer output for p = 1: the layers above see zeros, and the
    layers below get gradient only through their own h_n. Deterministic, so torch is an exact
    oracle."""
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=3,
        dropout=0.0 if assigned else 1,
        dtype=F64,
        seed=5,
        bidirectional=bidirectional,
    )
    if assigned:
        layer.dropout = 1  # torch's p range; this was a ZeroDivisionError
    assert layer.dropout == 1.0
    module = _torch_twin(torch, layer)
    dirs = 2 if bidirectional else 1
    x = rng.standard_normal((T, B, D))
    h0 = rng.standard_normal((3 * dirs, B, H))
    R = rng.standard_normal((T, B, dirs * H))
    S = rng.standard_normal((3 * dirs, B, H))

    x_t, h0_t = _leaf(torch, x), _leaf(torch, h0)
    y_t, hn_t = module(x_t, h0_t)
    ((y_t * torch.from_numpy(R)).sum() + (hn_t * torch.from_numpy(S)).sum()).backward()

    y, h_n = layer(x, h0)
    assert_close(y, y_t.detach().numpy(), F64, "y")
    assert_close(h_n, hn_t.detach().numpy(), F64, "h_n")
    dx, dh0 = layer.backward(R, S)
    assert_close(dx, x_t.grad.numpy(), F64, "dx")  # only through layer 0's own h_n
    assert_close(dh0, h0_t.grad.numpy(), F64, "dh0")
    _assert_grads(layer, module, F64)


def test_dropout_with_one_layer_warns_as_torch(torch):
    with pytest.warns(UserWarning, match=r"num_layers greater than 1.*dropout=0.5") as ours:
        rnnfast.RNN(D, H, dropout=0.5)
    with pytest.warns(UserWarning, match=r"num_layers greater than 1.*dropout=0.5") as theirs:
        torch.nn.RNN(D, H, dropout=0.5)
    assert str(ours[0].message) == str(theirs[0].message)
    assert ours[0].filename == __file__  # pointed at the caller's line
    layer = rnnfast.RNN(D, H)
    with pytest.warns(UserWarning, match="num_layers"):
        layer.dropout = 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn about
        rnnfast.RNN(D, H, dropout=0.0)
        rnnfast.RNN(D, H, num_layers=2, dropout=0.5).dropout = 1.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_dropout_layer_p_one_matches_torch(torch, dtype, rng):
    x = rng.standard_normal((B, T, D)).astype(dtype)
    d = rng.standard_normal(x.shape).astype(dtype)
    layer = Dropout(1.0, seed=0, dtype=dtype)
    module = torch.nn.Dropout(1.0)
    x_t = _leaf(torch, x)
    y_t = module(x_t)
    (y_t * torch.from_numpy(d)).sum().backward()
    y = layer(x)
    assert y.dtype == dtype and np.all(np.isfinite(y))
    np.testing.assert_array_equal(y, y_t.detach().numpy())
    np.testing.assert_array_equal(layer.backward(d), x_t.grad.numpy())
    np.testing.assert_array_equal(layer.eval()(x), module.eval()(torch.from_numpy(x)).numpy())


# ---- 4. unbatched input --------------------------------------------------------------------------

UNBATCHED = [
    {},
    {"num_layers": 2, "bidirectional": True},
    {"batch_first": True},
    {"num_layers": 3, "nonlinearity": "relu", "batch_first": True, "bidirectional": True},
]


@pytest.mark.parametrize("with_h0", [True, False], ids=["h0", "noh0"])
@pytest.mark.parametrize("kw", UNBATCHED, ids=["plain", "stack-bi", "batch-first", "deep"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_unbatched_forward_and_backward_match_torch(torch, dtype, kw, with_h0, rng):
    layer = rnnfast.RNN(D, H, dtype=dtype, seed=6, **kw)
    module = _torch_twin(torch, layer)
    rows = layer.num_layers * layer.num_directions
    x = rng.standard_normal((T, D)).astype(dtype)  # (T, D) whatever batch_first, as torch
    h0 = rng.standard_normal((rows, H)).astype(dtype) if with_h0 else None
    R = rng.standard_normal((T, layer.output_size)).astype(dtype)
    S = rng.standard_normal((rows, H)).astype(dtype)

    x_t = _leaf(torch, x)
    h0_t = _leaf(torch, h0) if with_h0 else None
    y_t, hn_t = module(x_t, h0_t)
    ((y_t * torch.from_numpy(R)).sum() + (hn_t * torch.from_numpy(S)).sum()).backward()

    y, h_n = layer(x, h0)
    assert y.shape == (T, layer.output_size) and h_n.shape == (rows, H)
    assert_close(y, y_t.detach().numpy(), dtype, "y")
    assert_close(h_n, hn_t.detach().numpy(), dtype, "h_n")
    dx, dh0 = layer.backward(R, S)
    assert dx.shape == x.shape and dh0.shape == (rows, H)
    assert_close(dx, x_t.grad.numpy(), dtype, "dx")
    if with_h0:
        assert_close(dh0, h0_t.grad.numpy(), dtype, "dh0")
    _assert_grads(layer, module, dtype)


@pytest.mark.parametrize("merge_mode", ["concat", "sum"])
@pytest.mark.parametrize("return_state", [False, True])
def test_unbatched_keras_last_output(merge_mode, return_state, rng):
    """Keras's last output of an unbatched sequence is (out,): the batch of one's row."""
    kw = {
        "bidirectional": True,
        "merge_mode": merge_mode,
        "return_sequences": False,
        "return_state": return_state,
        "dtype": F64,
        "seed": 7,
    }
    one, batched = rnnfast.RNN(D, H, **kw), rnnfast.RNN(D, H, **kw)
    x = rng.standard_normal((T, D))
    got, want = one(x), batched(x[:, None])
    if return_state:
        (got, h_n), (want, h_want) = got, want
        assert h_n.shape == (2, H)
        np.testing.assert_array_equal(h_n, h_want[:, 0])
    assert got.shape == (one.output_size,)
    np.testing.assert_array_equal(got, want[0])
    d = rng.standard_normal(got.shape)
    dx, dh0 = one.backward(d)
    dx_want, dh0_want = batched.backward(d[None])
    np.testing.assert_array_equal(dx, dx_want[:, 0])
    np.testing.assert_array_equal(dh0, dh0_want[:, 0])


def test_unbatched_training_output_is_read_only(rng):
    y, _ = rnnfast.RNN(D, H, dtype=F64)(rng.standard_normal((T, D)))
    assert not y.flags.writeable


def test_unbatched_go_backwards_and_stateful_chain(rng):
    x = rng.standard_normal((2 * T, D))
    whole = rnnfast.RNN(D, H, dtype=F64, seed=8)
    chunked = rnnfast.RNN(D, H, dtype=F64, seed=8, stateful=True)
    y, h_n = whole(x)
    y1, _ = chunked(x[:T])
    y2, h2 = chunked(x[T:])
    assert_close(np.concatenate([y1, y2]), y, F64, "y")
    assert_close(h2, h_n, F64, "h_n")
    back = rnnfast.RNN(D, H, dtype=F64, seed=8, go_backwards=True, return_sequences=True)
    np.testing.assert_array_equal(back(x), whole(x[::-1])[0])


@pytest.mark.parametrize("num_layers", [1, 3])
def test_unbatched_step_matches_torch(torch, num_layers, rng):
    layer = rnnfast.RNN(D, H, num_layers=num_layers, dtype=F64, seed=9).eval()
    module = _torch_twin(torch, layer)
    x_t = rng.standard_normal(D)
    h = rng.standard_normal((num_layers, H))
    out, h_next = layer.step(x_t, h)
    y_t, hn_t = module(torch.from_numpy(x_t[None]), torch.from_numpy(h))  # unbatched, T = 1
    assert out.shape == (H,) and h_next.shape == (num_layers, H)
    assert_close(out, y_t[0].detach().numpy(), F64, "out")
    assert_close(h_next, hn_t.detach().numpy(), F64, "h_next")
    out0, h0_next = layer.step(list(x_t))  # zeros for h; any array-like
    y0, hn0 = module(torch.from_numpy(x_t[None]))
    assert_close(out0, y0[0].detach().numpy(), F64, "out, h = None")
    assert_close(h0_next, hn0.detach().numpy(), F64, "h_next, h = None")


def test_unbatched_stateful_step_carries_the_state(rng):
    layer = rnnfast.RNN(D, H, dtype=F64, seed=10, stateful=True).eval()
    xs = rng.standard_normal((T, D))
    for x_t in xs:
        out, h = layer.step(x_t)
    y, h_n = rnnfast.RNN(D, H, dtype=F64, seed=10).eval()(xs)
    assert_close(out, y[-1], F64, "out")
    assert_close(h, h_n, F64, "h")


def test_unbatched_token_ids_with_embedding(rng):
    """Token ids (T,) fused into the layer equal the unbatched embedded sequence, and so do
    the gradients (the table's through Embedding's own backward)."""
    emb, emb_plain = Embedding(7, D, dtype=F64, seed=11), Embedding(7, D, dtype=F64, seed=11)
    fused, plain = rnnfast.RNN(D, H, dtype=F64, seed=12), rnnfast.RNN(D, H, dtype=F64, seed=12)
    ids = rng.integers(0, 7, size=T * 4)  # more tokens than entries
    y, h_n = fused(ids, embedding=emb)
    y_want, h_want = plain(emb_plain(ids))
    assert y.shape == (T * 4, H) and h_n.shape == (1, H)
    assert_close(y, y_want, F64, "y")
    assert_close(h_n, h_want, F64, "h_n")
    d = rng.standard_normal(y.shape)
    dx, dh0 = fused.backward(d)
    dx_want, dh0_want = plain.backward(d)
    emb_plain.backward(dx_want)
    assert dx is None
    assert_close(dh0, dh0_want, F64, "dh0")
    assert_close(emb.grads["weight"], emb_plain.grads["weight"], F64, "table gradient")
    for k, g in plain.grads.items():
        assert_close(fused.grads[k], g, F64, k)


def test_unbatched_errors_name_the_argument(torch, rng):
    layer = rnnfast.RNN(D, H, num_layers=2, dtype=F64)
    x = rng.standard_normal((T, D))
    with pytest.raises(ValueError, match=r"lengths: unbatched input.*x\[:, None\]"):
        layer(x, lengths=[T])
    with pytest.raises(ValueError, match=r"mask: unbatched input"):
        layer(x, mask=np.ones((1, T), bool))
    # torch: "For unbatched 2-D input, hx should also be 2-D"
    with pytest.raises(RuntimeError, match="hx should also be 2-D"):
        _torch_twin(torch, layer)(torch.from_numpy(x), torch.zeros(2, 1, H, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"h0: with unbatched input.*\(2, 6\).*\(2, 1, 6\)"):
        layer(x, np.zeros((2, 1, H)))
    with pytest.raises(ValueError, match=r"h0: .*without a batch axis goes with unbatched"):
        layer(x[:, None], np.zeros((2, H)))
    with pytest.raises(ValueError, match=r"x: expected 3 dimensions .*or 2 \(T, D\)"):
        layer(x[0])
    layer(x)
    with pytest.raises(ValueError, match=r"dy: expected shape \(5, 6\).*\(5, 1, 6\)"):
        layer.backward(np.zeros((T, 1, H)))
    with pytest.raises(ValueError, match=r"dh_n: with unbatched input"):
        layer.backward(None, np.zeros((2, 1, H)))
    layer.backward(np.zeros((T, H)))  # the failed calls kept the forward
    with pytest.raises(ValueError, match=r"h: with unbatched input"):
        layer.step(x[0], np.zeros((2, 1, H)))
    with pytest.raises(ValueError, match=r"h: .*without a batch axis goes with x_t"):
        layer.step(x[:1], np.zeros((2, H)))


# ---- 5. repr -------------------------------------------------------------------------------------

NON_DEFAULT = {
    "num_layers": 2,
    "nonlinearity": "relu",
    "bias": False,
    "batch_first": True,
    "dropout": 0.25,
    "bidirectional": True,
    "residual": True,
    "merge_mode": "sum",
    "go_backwards": True,
    "return_sequences": False,
    "return_state": True,
    "stateful": True,
    "alpha": 0.5,
}
NEEDS = {
    "residual": {"num_layers": 2},
    "merge_mode": {"bidirectional": True},
    "dropout": {"num_layers": 2},
}


@pytest.mark.parametrize("name", list(NON_DEFAULT))
def test_repr_shows_every_option_that_differs_from_its_default(name):
    base = NEEDS.get(name, {})
    layer = rnnfast.RNN(D, H, **base, **{name: NON_DEFAULT[name]})
    assert f"{name}={NON_DEFAULT[name]!r}" in repr(layer)
    assert repr(layer) != repr(rnnfast.RNN(D, H, **base))


def test_repr_shows_return_sequences_true_and_merge_mode_none_and_dtype():
    assert "return_sequences=True" in repr(rnnfast.RNN(D, H, return_sequences=True))
    assert "merge_mode=None" in repr(rnnfast.RNN(D, H, bidirectional=True, merge_mode=None))
    assert repr(rnnfast.RNN(D, H, dtype=F64)).endswith("dtype=float64)")
    assert repr(rnnfast.RNN(D, H)) == f"RNN({D}, {H}, dtype=float32)"
    assert "alpha=[1.0, 0.5]" in repr(rnnfast.RNN(D, H, num_layers=2, alpha=[1.0, 0.5]))


def test_repr_follows_assignments():
    layer = rnnfast.RNN(D, H)
    layer.return_state = True
    assert "return_state=True" in repr(layer)


def test_repr_of_torch_options_reads_as_torchs(torch):
    kw = {
        "num_layers": 2,
        "bias": False,
        "batch_first": True,
        "dropout": 0.5,
        "bidirectional": True,
    }
    ours = repr(rnnfast.RNN(D, H, **kw))
    assert ours == repr(torch.nn.RNN(D, H, **kw))[:-1] + ", dtype=float32)"


# ---- 6. a float dtype other than the layer's: the message gives the fix -------------------------


def _calls(dtype):
    """Each layer entry point given an array of the other float dtype, as (name, call)."""
    other = F64 if dtype == F32 else F32
    z = lambda *shape: np.zeros(shape, other)
    ok = lambda *shape: np.zeros(shape, dtype)

    def trained(layer, x):
        layer(x)
        return layer

    return [
        ("x", lambda: rnnfast.RNN(D, H, dtype=dtype)(z(T, B, D))),
        ("x", lambda: rnnfast.RNN(D, H, dtype=dtype)(z(T, D))),
        ("h0", lambda: rnnfast.RNN(D, H, dtype=dtype)(ok(T, B, D), z(1, B, H))),
        ("dy", lambda: trained(rnnfast.RNN(D, H, dtype=dtype), ok(T, B, D)).backward(z(T, B, H))),
        ("x_t", lambda: rnnfast.RNN(D, H, dtype=dtype).step(z(B, D))),
        ("h", lambda: rnnfast.RNN(D, H, dtype=dtype).step(ok(B, D), z(1, B, H))),
        ("x", lambda: Linear(D, H, dtype=dtype)(z(B, D))),
        ("dy", lambda: trained(Linear(D, H, dtype=dtype), ok(B, D)).backward(z(B, H))),
        ("x", lambda: Dropout(0.5, dtype=dtype)(z(B, D))),
        ("d_out", lambda: trained(Embedding(4, D, dtype=dtype), [1, 2]).backward(z(2, D))),
    ]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_mismatch_message_gives_the_fix(dtype):
    want, other = np.dtype(dtype).name, "float64" if dtype == F32 else "float32"
    for name, call in _calls(dtype):
        with pytest.raises(TypeError) as info:
            call()
        msg = str(info.value)
        assert msg.startswith(
            f"{name}: expected a {want} array (the layer's dtype), got dtype {other}"
        ), msg
        assert f"{name}.astype(np.{want})" in msg, msg
        assert f"build the layer with dtype=np.{other}" in msg, msg


def test_a_python_list_meets_a_float32_layer_with_the_fix():
    with pytest.raises(TypeError, match=r"x\.astype\(np\.float32\).*dtype=np\.float64"):
        rnnfast.RNN(1, H)([[[0.5]]])


def test_no_layer_dtype_is_suggested_that_layers_lack():
    with pytest.raises(TypeError, match=r"x\.astype\(np\.float32\)$"):
        rnnfast.RNN(D, H)(np.zeros((T, B, D), np.float16))


# ---- 7. merge_mode=None: [forward, backward] -----------------------------------------------------

FORMS = {
    "torch": {},
    "seq": {"return_sequences": True},
    "seq-state": {"return_sequences": True, "return_state": True},
    "last": {"return_sequences": False},
    "last-state": {"return_sequences": False, "return_state": True},
}


def _split_output(result, kw):
    """(forward, backward, h_n or None) from what a merge_mode=None layer returned."""
    if not kw:  # PyTorch's form: ([forward, backward], h_n)
        assert isinstance(result, tuple) and isinstance(result[0], list)
        (fwd, bwd), h_n = result
        return fwd, bwd, h_n
    assert isinstance(result, list)
    if kw.get("return_state"):  # Keras flattens the states after the outputs
        assert len(result) == 3
        return tuple(result)
    assert len(result) == 2
    return result[0], result[1], None


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("batch_first", [False, True], ids=["TBD", "BTD"])
@pytest.mark.parametrize("form", list(FORMS))
def test_merge_mode_none_matches_torch_split(torch, form, batch_first, num_layers, rng):
    """Values: torch's concatenated output, split; gradients: torch's autograd of a loss on
    the two halves (the last-output forms: the forward direction's last step, the backward
    direction's first, as Keras's Bidirectional)."""
    kw = FORMS[form]
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=num_layers,
        bidirectional=True,
        merge_mode=None,
        batch_first=batch_first,
        dtype=F64,
        seed=13,
        **kw,
    )
    module = _torch_twin(torch, layer)
    x = rng.standard_normal((B, T, D) if batch_first else (T, B, D))
    x_t = _leaf(torch, x)
    y_t, hn_t = module(x_t)
    t_axis = 1 if batch_first else 0
    if kw.get("return_sequences") is False:
        fwd_t = y_t.select(t_axis, T - 1)[..., :H]
        bwd_t = y_t.select(t_axis, 0)[..., H:]
    else:
        fwd_t, bwd_t = y_t[..., :H], y_t[..., H:]
    RF = rng.standard_normal(tuple(fwd_t.shape))
    RB = rng.standard_normal(tuple(bwd_t.shape))
    ((fwd_t * torch.from_numpy(RF)).sum() + (bwd_t * torch.from_numpy(RB)).sum()).backward()

    fwd, bwd, h_n = _split_output(layer(x), kw)
    assert_close(fwd, fwd_t.detach().numpy(), F64, "forward")
    assert_close(bwd, bwd_t.detach().numpy(), F64, "backward")
    if h_n is not None:
        assert_close(h_n, hn_t.detach().numpy(), F64, "h_n")
    dx, _ = layer.backward([RF, RB])
    assert_close(dx, x_t.grad.numpy(), F64, "dx")
    _assert_grads(layer, module, F64)


def test_merge_mode_none_gradients_are_the_concat_modes(rng):
    """With lengths (torch needs packing there): the same numbers as concat mode given the
    concatenated gradient, and a None part is zeros."""
    lengths = np.array([T, 2, 0])
    x = rng.standard_normal((T, B, D))
    dF, dB = rng.standard_normal((T, B, H)), rng.standard_normal((T, B, H))
    dh_n = rng.standard_normal((4, B, H))

    def run(merge_mode, d):
        layer = rnnfast.RNN(
            D, H, num_layers=2, bidirectional=True, merge_mode=merge_mode, dtype=F64, seed=14
        )
        out = layer(x, lengths=lengths)
        return out, layer.backward(d, dh_n), layer.grads

    (parts, h_n), (dx, dh0), grads = run(None, [dF, dB])
    (whole, h_c), (dx_c, dh0_c), grads_c = run("concat", np.concatenate([dF, dB], axis=2))
    np.testing.assert_array_equal(np.concatenate(parts, axis=2), whole)
    np.testing.assert_array_equal(h_n, h_c)
    np.testing.assert_array_equal(dx, dx_c)
    np.testing.assert_array_equal(dh0, dh0_c)
    for k in grads_c:
        np.testing.assert_array_equal(grads[k], grads_c[k], err_msg=k)
    _, (dx, _), _ = run(None, [None, dB])
    _, (dx_z, _), _ = run(None, [np.zeros_like(dF), dB])
    np.testing.assert_array_equal(dx, dx_z)


def test_merge_mode_none_unbatched(rng):
    layer = rnnfast.RNN(
        D, H, bidirectional=True, merge_mode=None, return_sequences=False, dtype=F64, seed=15
    )
    fwd, bwd = layer(rng.standard_normal((T, D)))
    assert fwd.shape == bwd.shape == (H,)
    dx, dh0 = layer.backward([np.ones(H), None])
    assert dx.shape == (T, D) and dh0.shape == (2, H)


def test_merge_mode_none_backward_errors(rng):
    layer = rnnfast.RNN(D, H, bidirectional=True, merge_mode=None, dtype=F64)
    layer(rng.standard_normal((T, B, D)))
    with pytest.raises(TypeError, match=r"dy: merge_mode=None .*\[d_forward, d_backward\].*nd"):
        layer.backward(np.zeros((T, B, 2 * H)))
    with pytest.raises(TypeError, match=r"list of 3"):
        layer.backward([None, None, None])
    with pytest.raises(ValueError, match=r"dy\[1\]: expected shape \(5, 3, 6\).*backward"):
        layer.backward([None, np.zeros((T, B, H + 1))])
    with pytest.raises(
        TypeError, match=r"dy\[0\]: expected a float64 array.*got dtype float32.*astype"
    ):
        layer.backward([np.zeros((T, B, H), F32), None])
    layer.backward([None, np.zeros((T, B, H))])  # the failed calls kept the forward
    with pytest.raises(ValueError, match="needs bidirectional=True"):
        rnnfast.RNN(D, H, merge_mode=None)


@pytest.mark.parametrize("return_sequences", [True, False], ids=["seq", "last"])
def test_merge_mode_none_matches_keras(keras, return_sequences, rng):
    """Keras's own Bidirectional(merge_mode=None, return_state=True) returns (forward,
    backward, h_forward, h_backward); rnnfast's [forward, backward, h_n] holds the same."""
    lengths = np.array([T, 2, 1])
    mask = np.arange(T)[None, :] < lengths[:, None]
    x = rng.standard_normal((B, T, D)).astype(F32)
    x[~mask] = 0.0
    kl = keras.layers.Bidirectional(
        keras.layers.SimpleRNN(H, return_sequences=return_sequences, return_state=True),
        merge_mode=None,
    )
    kl.build((None, T, D))
    kl.set_weights([rng.uniform(-0.6, 0.6, tuple(v.shape)).astype(F32) for v in kl.weights])
    expected = [o.detach().cpu().numpy() for o in kl(x, mask=mask)]
    assert len(expected) == 4

    layer = rnnfast.RNN(
        D,
        H,
        batch_first=True,
        bidirectional=True,
        merge_mode=None,
        return_sequences=return_sequences,
        return_state=True,
    )
    interop.load_keras(layer, kl)
    fwd, bwd, h_n = layer(x, mask=mask)
    for got, want, what in [
        (fwd, expected[0], "forward"),
        (bwd, expected[1], "backward"),
        (h_n[0], expected[2], "h_forward"),
        (h_n[1], expected[3], "h_backward"),
    ]:
        assert_close(got, want, F32, what)


def test_from_torch_reads_torchs_int_bidirectional_by_truth(torch):
    """torch accepts bidirectional=1 (and keeps the 1); rnnfast refuses it from users, but a
    torch module built so is still a bidirectional RNN to convert."""
    module = torch.nn.RNN(D, H, bidirectional=1)
    layer = interop.from_torch(module)
    assert layer.bidirectional is True
    with pytest.raises(TypeError, match="bidirectional: expected a bool, got 1"):
        rnnfast.RNN(D, H, bidirectional=1)
