"""What precision= refuses, by name, and where: a value that is not one of its two, bf16 for
float64 layers, for quantized copies and for layers that multiply outside rnnfast's kernels,
and bf16 on a CPU without bf16 products (a RuntimeError naming its ISA)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import rnnfast
from rnnfast import _core, optim, training

RECURRENT = [
    rnnfast.RNN,
    rnnfast.GRU,
    rnnfast.LSTM,
    rnnfast.LayerNormLSTM,
    rnnfast.DeepTransitionRNN,
]


@contextlib.contextmanager
def no_bf16_products():
    """A CPU without bf16 products, as far as rnnfast can tell: the avx2 kernels active and
    no emulation (bf16 products need the avx512 kernels and AVX512-BF16 or AMX)."""
    isa, emulated = _core.active_isa(), _core.bf16_emulation()
    _core.set_bf16_emulation(False)
    _core.set_active_isa("avx2" if "avx2" in _core.supported_isas() else "baseline")
    try:
        assert _core.bf16_products_path() == ""
        yield _core.active_isa()
    finally:
        _core.set_active_isa(isa)
        _core.set_bf16_emulation(emulated)


@pytest.fixture(autouse=True)
def emulated(emulated_products):
    """bf16 products everywhere (the test switch), so the refusals are those of the layers."""


def _fit(model, precision, **kwargs):
    x = np.zeros((4, 3, 2), np.float32)
    y = np.zeros((4, 1), np.float32)
    return training.fit(
        model, x, y, loss="mse", optimizer=optim.SGD(model, lr=0.1), batch_size=2,
        verbose=0, precision=precision, **kwargs,
    )  # fmt: skip


# ---- values --------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", RECURRENT)
@pytest.mark.parametrize(
    "value, error, match",
    [
        (
            "bfloat16",
            ValueError,
            r"precision: expected one of \('float32', 'bf16'\), got 'bfloat16'",
        ),
        ("BF16", ValueError, "got 'BF16'"),
        (None, TypeError, "precision: expected one of .* got NoneType"),
        (16, TypeError, "got int"),
        (np.float32, TypeError, "got type"),
    ],
)
def test_a_layer_refuses_what_is_not_a_precision(cls, value, error, match):
    with pytest.raises(error, match=match):
        cls(3, 4, precision=value)
    layer = cls(3, 4)
    with pytest.raises(error, match=match):
        layer.precision = value
    assert layer.precision == "float32"  # a failed assignment changes nothing


@pytest.mark.parametrize("cls", RECURRENT)
def test_float64_layers_refuse_bf16_by_name(cls):
    with pytest.raises(ValueError, match=r"precision='bf16': expected a float32 layer.*float64"):
        cls(3, 4, dtype=np.float64, precision="bf16")
    layer = cls(3, 4, dtype=np.float64)
    with pytest.raises(ValueError, match="dtype=np.float32"):
        layer.precision = "bf16"
    assert layer.precision == "float32"


def test_models_and_fit_refuse_what_is_not_a_precision():
    with pytest.raises(TypeError, match="precision: expected one of .* got int"):
        rnnfast.Sequential([rnnfast.Dense(2, 1)], precision=1)
    with pytest.raises(ValueError, match="precision: expected one of .* got 'fp16'"):
        _fit(rnnfast.Sequential([rnnfast.Dense(2, 1)]), "fp16")
    model = rnnfast.Sequential([rnnfast.Dense(2, 1)])
    with pytest.raises(ValueError, match="got 'half'"):
        model.precision = "half"
    assert model.precision is None


def test_float64_models_refuse_bf16_naming_the_layer():
    model = rnnfast.Sequential(
        [rnnfast.GRU(2, 3, batch_first=True, return_sequences=False), rnnfast.Dense(3, 1)]
    )
    model64 = rnnfast.Sequential(
        [
            rnnfast.GRU(2, 3, batch_first=True, return_sequences=False, dtype=np.float64),
            rnnfast.Dense(3, 1, dtype=np.float64),
        ]
    )
    with pytest.raises(ValueError, match=r"model\.0 \(GRU\) has float64 parameters"):
        rnnfast.Sequential(model64.layers, precision="bf16")
    with pytest.raises(ValueError, match=r"model\.0 \(GRU\) has float64 parameters"):
        _fit(model64, "bf16")
    _fit(model, "bf16")  # the float32 model trains


# ---- what cannot honour it -----------------------------------------------------------------


@pytest.mark.parametrize("cls", [rnnfast.RNN, rnnfast.GRU, rnnfast.LSTM])
@pytest.mark.parametrize("mode", ["bf16", "int8"])
def test_quantized_copies_refuse_bf16_products(cls, mode):
    layer = cls(3, 4, precision="bf16")
    copy = rnnfast.quantize(layer, mode)
    assert copy.precision == "float32"  # its own weights' products, not the float layer's
    with pytest.raises(ValueError, match=f"quantized \\({mode}\\) inference copy"):
        copy.precision = "bf16"
    model = rnnfast.quantize(rnnfast.Sequential([cls(3, 4, return_sequences=True)]), mode)
    with pytest.raises(ValueError, match=rf"model\.0 \(Sequential\) is a quantized \({mode}\)"):
        rnnfast.Sequential([model], precision="bf16")


def test_layers_that_multiply_outside_the_kernels_are_refused_by_name():
    jordan = rnnfast.JordanRNN(2, 3, 1)
    with pytest.raises(ValueError, match=r"model\.0 \(JordanRNN\) does not run all its products"):
        rnnfast.Sequential([jordan], precision="bf16")

    class NumpyDense(rnnfast.nn.Layer):  # a layer of the user's: its product is NumPy's
        def __init__(self):
            super().__init__()
            self.add_parameter("w", np.ones((1, 2)))

        def forward(self, x):
            self._cache = x
            return x @ self._params["w"].T

        def backward(self, d):
            self.grads["w"] += (d.reshape(-1, 1).T @ self._take_cache().reshape(-1, 2)).reshape(
                1, 2
            )

    with pytest.raises(ValueError, match=r"model\.1 \(NumpyDense\).*kernel_products = True"):
        rnnfast.Sequential([rnnfast.Dropout(0.1), NumpyDense()], precision="bf16")
    NumpyDense.kernel_products = True  # the user vouches for it: accepted
    rnnfast.Sequential([rnnfast.Dropout(0.1), NumpyDense()], precision="bf16")


# ---- a CPU without bf16 products ------------------------------------------------------------


@pytest.mark.parametrize("cls", RECURRENT)
def test_without_bf16_products_a_layer_names_the_isa(cls):
    layer = cls(3, 4, precision="bf16")  # made where bf16 runs
    with no_bf16_products() as isa:
        with pytest.raises(RuntimeError, match=f"precision='bf16': bf16 products need .*'{isa}'"):
            cls(3, 4, precision="bf16")
        with pytest.raises(RuntimeError, match=isa):
            layer(np.zeros((2, 1, 3), np.float32))  # a layer made elsewhere: at its call
        cls(3, 4, precision="float32")(np.zeros((2, 1, 3), np.float32))  # float32 runs
        assert _core.thread_products() == "float32"


def test_without_bf16_products_models_and_fit_name_the_isa():
    model = rnnfast.Sequential([rnnfast.RNN(2, 1, batch_first=True, return_sequences=False)])
    with no_bf16_products() as isa:
        with pytest.raises(RuntimeError, match=isa):
            rnnfast.Sequential(model.layers, precision="bf16")
        with pytest.raises(RuntimeError, match=isa):
            _fit(model, "bf16")
        _fit(model, "float32")
