"""Dense(activation=): forward against torch's functions, the backward against finite
differences in float64, assignment checked, save/load and ONNX keep it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import numerical_gradient

import rnnfast

ACTIVATIONS = ["relu", "tanh", "sigmoid", "softmax"]


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_forward_matches_torch_and_backward_finite_differences(torch, rng, activation):
    layer = rnnfast.Dense(4, 3, dtype=np.float64, seed=0, activation=activation)
    x = rng.standard_normal((2, 5, 4))
    y = layer(x)
    p = dict(layer.named_parameters())
    z = torch.tensor(x) @ torch.tensor(p["weight"]).T + torch.tensor(p["bias"])
    fn = {"relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}.get(
        activation, lambda t: torch.softmax(t, -1)
    )
    np.testing.assert_allclose(y, fn(z).numpy(), rtol=1e-12, atol=1e-14)
    assert not y.flags.writeable  # kept for the backward
    dy = rng.standard_normal(y.shape)
    layer.zero_grad()
    dx = layer.backward(dy)

    def loss():
        layer.eval()
        value = float(np.sum(layer(x) * dy))
        layer.train()
        return value

    np.testing.assert_allclose(dx, numerical_gradient(loss, x), rtol=1e-6, atol=1e-8)
    weight = p["weight"]
    np.testing.assert_allclose(
        layer.grads["weight"], numerical_gradient(loss, weight), rtol=1e-6, atol=1e-8
    )


def test_linear_is_the_identity_and_assignment_is_checked():
    layer = rnnfast.Dense(2, 2, seed=0, activation="linear")
    assert layer.activation is None and "activation" not in repr(layer)
    layer.activation = "tanh"
    assert layer.get_config()["activation"] == "tanh"
    with pytest.raises(ValueError, match="activation"):
        layer.activation = "swish"
    assert layer.activation == "tanh"


def test_save_load_keeps_the_activation(tmp_path, rng):
    layer = rnnfast.Dense(3, 2, seed=1, activation="softmax")
    layer.eval()
    layer.save(tmp_path / "dense.npz")
    loaded = rnnfast.load(tmp_path / "dense.npz")
    loaded.eval()
    x = rng.standard_normal((4, 3)).astype(np.float32)
    assert loaded.activation == "softmax"
    np.testing.assert_array_equal(loaded(x), layer(x))


def test_onnx_export_runs_the_activation(rng):
    onnxruntime = pytest.importorskip("onnxruntime")
    from rnnfast.io import onnx

    model = rnnfast.Sequential([rnnfast.Dense(3, 4, seed=2, activation="softmax")]).eval()
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)  # the graph reads sequences
    proto = onnx.export(model, None)
    session = onnxruntime.InferenceSession(
        proto.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (out,) = session.run(None, {session.get_inputs()[0].name: x})
    np.testing.assert_allclose(out, model(x), rtol=1e-5, atol=1e-6)
