"""rnnfast.interop: torch.nn.RNN in and out, Keras SimpleRNN weight conversion (NumPy only here;
tests/nn/test_rnn_keras_parity.py runs Keras itself)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ACTIVATIONS, DTYPES, assert_close

import rnnfast
from rnnfast import interop, reference
from rnnfast.nn.recurrent import rnn_torch

T, B, D, H = 6, 3, 5, 7

# (num_layers, bidirectional): the configurations round-tripped through torch
ARCHITECTURES = [(1, False), (2, False), (1, True), (3, True)]
ARCH_IDS = ["1layer", "2layers", "bidir", "3layers-bidir"]


def _torch_dtype(torch, dtype):
    return torch.float32 if dtype == np.float32 else torch.float64


def _torch_module(
    torch,
    dtype,
    nonlinearity="tanh",
    bias=True,
    batch_first=False,
    num_layers=1,
    bidirectional=False,
    seed=0,
):
    torch.manual_seed(seed)
    module = torch.nn.RNN(
        D,
        H,
        num_layers=num_layers,
        nonlinearity=nonlinearity,
        bias=bias,
        batch_first=batch_first,
        bidirectional=bidirectional,
    )
    return module.to(_torch_dtype(torch, dtype)).eval()


def _inputs(rng, dtype, batch_first, num_layers, bidirectional):
    x = rng.standard_normal((B, T, D) if batch_first else (T, B, D)).astype(dtype)
    h0 = rng.uniform(-1, 1, size=(num_layers * (2 if bidirectional else 1), B, H)).astype(dtype)
    return x, h0


def _torch_forward(torch, module, x, h0):
    with torch.no_grad():
        y, h_n = module(torch.from_numpy(x.copy()), torch.from_numpy(h0.copy()))
    return y.numpy(), h_n.numpy()


# ---- from_torch / to_torch -----------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHITECTURES, ids=ARCH_IDS)
@pytest.mark.parametrize("batch_first", [False, True], ids=["TBD", "BTD"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_from_torch_matches_torch(torch, dtype, nonlinearity, bias, batch_first, arch, rng):
    num_layers, bidirectional = arch
    module = _torch_module(torch, dtype, nonlinearity, bias, batch_first, num_layers, bidirectional)
    layer = interop.from_torch(module)

    assert isinstance(layer, rnnfast.RNN)
    for name in rnn_torch._TORCH_CONFIG:
        assert getattr(layer, name) == getattr(module, name), name
    assert layer.dtype == np.dtype(dtype)
    assert layer.training is False  # as the module (eval)
    state = layer.state_dict()
    assert list(state) == list(module.state_dict())
    for k, v in module.state_dict().items():
        np.testing.assert_array_equal(state[k], v.numpy())

    x, h0 = _inputs(rng, dtype, batch_first, num_layers, bidirectional)
    y, h_n = layer(x, h0)
    y_t, h_n_t = _torch_forward(torch, module, x, h0)
    assert_close(y, y_t, dtype, "y")
    assert_close(h_n, h_n_t, dtype, "h_n")


@pytest.mark.parametrize("arch", ARCHITECTURES, ids=ARCH_IDS)
@pytest.mark.parametrize("batch_first", [False, True], ids=["TBD", "BTD"])
@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_to_torch_matches_layer(torch, dtype, nonlinearity, batch_first, arch, rng):
    num_layers, bidirectional = arch
    layer = rnnfast.RNN(
        D,
        H,
        num_layers=num_layers,
        nonlinearity=nonlinearity,
        batch_first=batch_first,
        bidirectional=bidirectional,
        dtype=dtype,
        seed=3,
    )
    layer.eval()
    module = interop.to_torch(layer)

    assert isinstance(module, torch.nn.RNN)
    for name in rnn_torch._TORCH_CONFIG:
        assert getattr(module, name) == getattr(layer, name), name
    assert all(p.dtype == _torch_dtype(torch, dtype) for p in module.parameters())
    assert module.training is False
    x, h0 = _inputs(rng, dtype, batch_first, num_layers, bidirectional)
    y, h_n = layer(x, h0)
    y_t, h_n_t = _torch_forward(torch, module, x, h0)
    assert_close(y_t, y, dtype, "y")
    assert_close(h_n_t, h_n, dtype, "h_n")

    # the copy is independent of the layer, both ways, and round-trips exactly
    before = layer.state_dict()
    with torch.no_grad():
        for p in module.parameters():
            p.add_(1.0)
    for k, v in layer.state_dict().items():
        np.testing.assert_array_equal(v, before[k])
    back = interop.from_torch(interop.to_torch(layer))
    for k, v in back.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_to_torch_keeps_dropout_without_warning(torch):
    with pytest.warns(UserWarning, match="num_layers"):  # as torch.nn.RNN(D, H, dropout=0.25)
        layer = rnnfast.RNN(D, H, dropout=0.25)  # one layer: dropout has nothing to act on
    module = interop.to_torch(layer)  # pytest turns a warning into an error here
    assert module.dropout == 0.25
    with pytest.warns(UserWarning, match="num_layers"):  # the layer it builds warns, once
        assert interop.from_torch(module).dropout == 0.25


def test_from_torch_rejects_other_modules(torch):
    with pytest.raises(TypeError, match="torch.nn.RNN"):
        interop.from_torch(torch.nn.Linear(D, H))
    with pytest.raises(TypeError, match="float32 or float64"):
        interop.from_torch(torch.nn.RNN(D, H).half())


def test_from_torch_passes_the_class(torch):
    class MyRNN(rnnfast.RNN):
        pass

    assert type(interop.from_torch(torch.nn.RNN(D, H), cls=MyRNN)) is MyRNN


@pytest.mark.parametrize("option", [{"go_backwards": True}, {"alpha": 0.5}])
def test_to_torch_rejects_what_torch_cannot_express(torch, option):
    layer = rnnfast.RNN(D, H, **option)
    with pytest.raises(ValueError, match=next(iter(option))):
        interop.to_torch(layer)


@pytest.mark.parametrize("merge_mode", ["sum", "mul", "ave"])
def test_to_torch_rejects_merge_modes_other_than_concat(torch, merge_mode):
    layer = rnnfast.RNN(D, H, bidirectional=True, merge_mode=merge_mode)
    with pytest.raises(ValueError, match="merge_mode"):
        interop.to_torch(layer)


@pytest.mark.parametrize("dtype", DTYPES)
def test_load_state_dict_from_torch_parameters(torch, dtype, rng):
    """Tensors that require grad (named_parameters(), not state_dict()) load as they come."""
    module = _torch_module(torch, dtype)
    layer = rnnfast.RNN(D, H, dtype=dtype)
    layer.load_state_dict(dict(module.named_parameters()))
    for name, p in module.named_parameters():
        np.testing.assert_array_equal(layer.state_dict()[name], p.detach().numpy())
    x, h0 = _inputs(rng, dtype, False, 1, False)
    y, h_n = layer(x, h0)
    y_t, h_n_t = _torch_forward(torch, module, x, h0)
    assert_close(y, y_t, dtype, "y")
    assert_close(h_n, h_n_t, dtype, "h_n")


def test_load_state_dict_from_torch_casts_to_layer_dtype(torch, rng):
    module = _torch_module(torch, np.float64)
    layer = rnnfast.RNN(D, H, dtype=np.float32)
    layer.load_state_dict(module.state_dict())
    for k, v in layer.state_dict().items():
        assert v.dtype == np.float32
        np.testing.assert_array_equal(v, module.state_dict()[k].numpy().astype(np.float32))


def test_load_state_dict_from_torch_wrong_shape_changes_nothing(torch):
    layer = rnnfast.RNN(D, H)
    before = layer.state_dict()
    with pytest.raises(ValueError, match="weight_ih_l0"):
        layer.load_state_dict(torch.nn.RNN(D + 1, H).state_dict())
    for k, v in layer.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


# ---- Keras weight layout (NumPy only) ---------------------------------------------------------


def _keras_weights(rng, d, h, bias=True, dtype=np.float32):
    w = [rng.uniform(-0.5, 0.5, size=(d, h)), rng.uniform(-0.5, 0.5, size=(h, h))]
    if bias:
        w.append(rng.uniform(-0.5, 0.5, size=h))
    return [a.astype(dtype) for a in w]


def test_keras_to_state_dict_layout(rng):
    kernel, recurrent, bias = _keras_weights(rng, D, H)
    sd = interop.keras_simple_rnn_to_state_dict([kernel, recurrent, bias])
    assert list(sd) == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    np.testing.assert_array_equal(sd["weight_ih_l0"], kernel.T)
    np.testing.assert_array_equal(sd["weight_hh_l0"], recurrent.T)
    np.testing.assert_array_equal(sd["bias_ih_l0"], bias)
    np.testing.assert_array_equal(sd["bias_hh_l0"], np.zeros(H))
    assert all(v.flags.c_contiguous and v.dtype == np.float32 for v in sd.values())

    sd = interop.keras_simple_rnn_to_state_dict([kernel, recurrent], layer_index=2, reverse=True)
    assert list(sd) == ["weight_ih_l2_reverse", "weight_hh_l2_reverse"]


def test_state_dict_to_keras_adds_the_biases(rng):
    layer = rnnfast.RNN(D, H, dtype=np.float64, seed=1)
    sd = layer.state_dict()
    kernel, recurrent, bias = interop.state_dict_to_keras_simple_rnn(sd)
    np.testing.assert_array_equal(kernel, sd["weight_ih_l0"].T)
    np.testing.assert_array_equal(recurrent, sd["weight_hh_l0"].T)
    np.testing.assert_array_equal(bias, sd["bias_ih_l0"] + sd["bias_hh_l0"])
    no_bias = rnnfast.RNN(D, H, bias=False).state_dict()
    assert len(interop.state_dict_to_keras_simple_rnn(no_bias)) == 2
    with pytest.raises(ValueError, match="weight_ih_l1"):
        interop.state_dict_to_keras_simple_rnn(sd, layer_index=1)
    with pytest.raises(ValueError, match="both"):
        interop.state_dict_to_keras_simple_rnn({k: v for k, v in sd.items() if k != "bias_hh_l0"})


@pytest.mark.parametrize(
    "weights, match",
    [
        (lambda w: w[:1], "2 or 3 arrays"),
        (lambda w: [w[0][0], w[1], w[2]], "kernel"),
        (lambda w: [w[0], w[1][:, :-1], w[2]], "recurrent_kernel"),
        (lambda w: [w[0], w[1], w[2][:-1]], "bias"),
    ],
    ids=["count", "kernel", "recurrent", "bias"],
)
def test_keras_to_state_dict_bad_shapes(rng, weights, match):
    with pytest.raises(ValueError, match=match):
        interop.keras_simple_rnn_to_state_dict(weights(_keras_weights(rng, D, H)))


@pytest.mark.parametrize("nonlinearity", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_keras_weights_give_keras_recurrence(dtype, nonlinearity, rng):
    """Loaded Keras weights compute h_t = act(x_t kernel + h_{t-1} recurrent_kernel + bias)."""
    kernel, recurrent, bias = _keras_weights(rng, D, H, dtype=dtype)
    layer = interop.load_keras(
        rnnfast.RNN(D, H, nonlinearity=nonlinearity, batch_first=True, dtype=dtype),
        [kernel, recurrent, bias],
    )
    x = rng.standard_normal((B, T, D)).astype(dtype)
    act = np.tanh if nonlinearity == "tanh" else (lambda z: np.maximum(z, 0))
    h = np.zeros((B, H))
    expected = []
    for t in range(T):
        h = act(x[:, t].astype(np.float64) @ kernel + h @ recurrent + bias)
        expected.append(h)
    y, h_n = layer(x)
    assert_close(y, np.stack(expected, axis=1), dtype, "y")
    assert_close(h_n[0], h, dtype, "h_n")


def test_keras_weights_round_trip(rng):
    layer = rnnfast.RNN(D, H, dtype=np.float64, seed=2)
    copy = interop.load_keras(rnnfast.RNN(D, H, dtype=np.float64), interop.keras_weights(layer))
    x = rng.standard_normal((T, B, D))
    # b_hh folded into b_ih: the same function, the sum rounded once
    assert_close(
        copy(x)[0],
        reference.rnn_forward(
            x,
            **{
                "weight_ih": layer.state_dict()["weight_ih_l0"],
                "weight_hh": layer.state_dict()["weight_hh_l0"],
                "bias_ih": layer.state_dict()["bias_ih_l0"],
                "bias_hh": layer.state_dict()["bias_hh_l0"],
            },
        )[0],
        np.float64,
        "y",
    )


def test_keras_flat_weights_for_a_stack(rng):
    layer = rnnfast.RNN(D, H, num_layers=2, bidirectional=True)
    weights = (_keras_weights(rng, D, H) * 2) + (_keras_weights(rng, 2 * H, H) * 2)
    interop.load_keras(layer, weights)
    sd = layer.state_dict()
    np.testing.assert_array_equal(sd["weight_ih_l1_reverse"], weights[9].T)
    np.testing.assert_array_equal(sd["bias_ih_l0_reverse"], weights[5])
    assert interop.keras_weights(layer)[9].shape == (2 * H, H)


def test_load_keras_wrong_weights_change_nothing(rng):
    layer = rnnfast.RNN(D, H)
    before = layer.state_dict()
    with pytest.raises(ValueError, match="expected 3 arrays"):
        interop.load_keras(layer, _keras_weights(rng, D, H) * 2)
    with pytest.raises(ValueError, match="weight_ih_l0"):
        interop.load_keras(layer, _keras_weights(rng, D + 1, H))
    with pytest.raises(ValueError, match="expected 2 arrays"):
        interop.load_keras(rnnfast.RNN(D, H, bias=False), _keras_weights(rng, D, H))
    for k, v in layer.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_layer_methods_and_package_functions_round_trip(torch, tmp_path, rng):
    """RNN.from_torch, layer.to_torch, layer.save and rnnfast.load are the user-facing doors."""
    layer = rnnfast.RNN(3, 4, num_layers=2, bidirectional=True, dtype=np.float64, seed=1)
    x = rng.standard_normal((5, 2, 3))
    expected, _ = layer(x)
    from_module = rnnfast.RNN.from_torch(layer.to_torch())
    assert isinstance(from_module, rnnfast.RNN)
    np.testing.assert_array_equal(from_module(x)[0], expected)
    path = tmp_path / "layer.npz"
    layer.save(path)
    np.testing.assert_array_equal(rnnfast.load(path)(x)[0], expected)
