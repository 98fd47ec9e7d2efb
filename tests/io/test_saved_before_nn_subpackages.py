"""Files and pickles written before nn/ was grouped into subpackages (recurrent/, quantized/,
files/) still load, with the same outputs: the .npz format names a layer by its class name
only, and pickles name classes by module path, which rnnfast.nn keeps importable (its
``_MOVED``). The files in saved_before_nn_subpackages/ were written by the code of commit
84e5f29: a Sequential (Embedding, LSTM, GRU, Dense), its int8 copy, a JordanRNN and a
DeepTransitionRNN, with their eval-mode outputs (expected.npz)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

import rnnfast

FILES = Path(__file__).parent / "saved_before_nn_subpackages"
EXPECTED = np.load(FILES / "expected.npz")


def _outputs(name, layer):
    layer.eval()
    if name in ("model", "quantized"):
        return layer(EXPECTED["ids"])
    if name == "deep":
        return layer(EXPECTED["x"])[0]
    return layer(EXPECTED["x"], mode="free")


@pytest.mark.filterwarnings("ignore::rnnfast.nn.PaddingWarning")
@pytest.mark.parametrize("name", ["model", "quantized", "jordan", "deep"])
def test_an_npz_file_written_before_loads(name):
    layer = rnnfast.load(FILES / f"{name}.npz")
    np.testing.assert_array_equal(_outputs(name, layer), EXPECTED[name])


@pytest.mark.filterwarnings("ignore::rnnfast.nn.PaddingWarning")
def test_a_pickle_written_before_loads():
    with open(FILES / "layers.pickle", "rb") as f:
        layers = pickle.load(f)  # noqa: S301 (the test's own file)
    assert type(layers["model"].layers[1]) is rnnfast.LSTM
    assert type(layers["deep"]) is rnnfast.DeepTransitionRNN
    for name, layer in layers.items():
        np.testing.assert_array_equal(_outputs(name, layer), EXPECTED[name])
