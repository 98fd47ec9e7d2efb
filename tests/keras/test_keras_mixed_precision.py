"""rnnfast.keras under Keras's "mixed_bfloat16" dtype policy (set globally, per layer by name
or as a ``keras.DTypePolicy``) beside Keras 3's own layers under the same policy, on the same
weights: the same output dtypes (bfloat16; float32 variables), and forward values and trained
weights that both stay within one bound of Keras's float32 result; the policy survives
save / load (the front's and Keras's files); a policy rnnfast cannot run is refused by name.
Every bf16 path: emulated (any CPU) and each native one this CPU runs.

Bounds (as ``tests/test_torch_autocast.py`` derives them): bf16's unit roundoff u = 2**-8;
a GEMM with both operands rounded to bf16 and float32 sums is off by ~2u of its terms' scale,
a step's pre-activation holds two, a contracting recurrence at most doubles what it carries:
8u of the float32 output's largest magnitude (Keras's own mixed layers also round their
states and outputs to bf16, inside that). Training: an SGD update is the learning rate times
the gradients, whose backward chains twice the GEMMs: 16u of the largest float32 update of
each weight. Measured here: outputs ~3u off for Keras and ~1.5u for rnnfast, updates ~4u and
~2u."""

from __future__ import annotations

import numpy as np
import pytest
from bf16_paths import BF16_UNIT_ROUNDOFF as U
from bf16_paths import bf16_path  # noqa: F401 (the fixture below)

import rnnfast.keras as rk
from rnnfast import nn

pytestmark = [
    pytest.mark.usefixtures("bf16_path"),  # emulated, and each native path this CPU runs
    # Keras 3's predict on the torch backend: NumPy's deprecation warning, from inside Keras
    pytest.mark.filterwarnings(
        "ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning"
    ),
]

FORWARD_BOUND = 8 * U
UPDATE_BOUND = 16 * U
N, T, D, H, K = 24, 6, 3, 5, 4
KINDS = ["SimpleRNN", "GRU", "LSTM"]


@pytest.fixture
def policy(keras):
    """Keras's set_global_policy, the global policy restored after the test."""
    before = keras.mixed_precision.global_policy()
    yield keras.mixed_precision.set_global_policy
    keras.mixed_precision.set_global_policy(before)


def dtype_name(array):
    """A torch tensor's or a NumPy array's dtype by name ("bfloat16", "float32")."""
    return str(array.dtype).removeprefix("torch.")


def numpy(array):
    if hasattr(array, "detach"):
        array = array.detach().float().numpy()
    return np.asarray(array, dtype=np.float64)


def error(got, want):
    """The largest difference in units of the float32 result's scale."""
    got, want = numpy(got), numpy(want)
    return float(np.abs(got - want).max() / np.abs(want).max())


def keras_weights(model):
    return [v.value.detach().cpu().numpy().copy() for v in model.weights]


def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, T, D)).astype(np.float32)
    return x, rng.standard_normal((N, K)).astype(np.float32)


def layer_twins(keras, kind, dtype, **options):
    """Keras's layer under ``dtype``, its float32 twin and rnnfast's under ``dtype``, all with
    the same weights (built on the data)."""
    x, _ = data()
    theirs = getattr(keras.layers, kind)(H, dtype=dtype, **options)
    theirs(x)
    plain = getattr(keras.layers, kind)(H, **options)
    plain(x)
    plain.set_weights(theirs.get_weights())
    ours = getattr(rk, kind)(H, dtype=dtype, **options)
    ours(x)
    ours.set_weights(theirs.get_weights())
    return theirs, plain, ours


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("form", ["name", "DTypePolicy"])
def test_a_mixed_layer_matches_keras(keras, policy, kind, form):
    dtype = "mixed_bfloat16" if form == "name" else keras.DTypePolicy("mixed_bfloat16")
    theirs, plain, ours = layer_twins(keras, kind, dtype, return_sequences=True, return_state=True)
    x, _ = data()
    expected, got, want = theirs(x), ours(x), plain(x)
    assert [dtype_name(a) for a in got] == [dtype_name(a) for a in expected]
    assert dtype_name(got[0]) == "bfloat16"
    for a, b, w in zip(got, expected, want):
        assert error(b, w) <= FORWARD_BOUND, f"Keras's: {error(b, w) / U:.2f}u"
        assert error(a, w) <= FORWARD_BOUND, f"rnnfast's: {error(a, w) / U:.2f}u"
    assert ours.dtype_policy == "mixed_bfloat16" and ours.compute_dtype == "bfloat16"
    assert ours.variable_dtype == "float32" == theirs.variable_dtype
    assert all(w.dtype == np.float32 for w in ours.get_weights())
    assert ours.layer.precision == "bf16"


@pytest.mark.parametrize("kind", KINDS)
def test_the_global_policy_gives_a_bidirectional_the_mixed_policy(keras, policy, kind):
    x, _ = data()
    policy("mixed_bfloat16")
    theirs = keras.layers.Bidirectional(getattr(keras.layers, kind)(H))
    ours = rk.Bidirectional(getattr(rk, kind)(H))
    expected = theirs(x)
    policy("float32")
    plain = keras.layers.Bidirectional(getattr(keras.layers, kind)(H))
    plain(x)
    plain.set_weights(theirs.get_weights())
    ours(x)
    ours.set_weights(theirs.get_weights())
    got = ours(x)
    assert dtype_name(got) == dtype_name(expected) == "bfloat16"
    assert error(got, plain(x)) <= FORWARD_BOUND
    assert ours.layer.precision == "bf16"


def stack(lib, kind, head_dtype=None):
    """Two recurrent layers and a Dense head of ``lib`` (keras.layers or rnnfast.keras)."""
    return [
        lib.Input((T, D)),
        getattr(lib, kind)(H, return_sequences=True),
        lib.GRU(H + 2),
        lib.Dense(K, dtype=head_dtype),
    ]


def model_twins(keras, policy, kind, head_dtype=None):
    """Keras's model and rnnfast's under the global mixed policy, and Keras's float32 twin,
    with the same weights."""
    policy("mixed_bfloat16")
    keras.utils.set_random_seed(1)
    theirs = keras.Sequential(stack(keras.layers, kind, head_dtype))
    ours = rk.Sequential(stack(rk, kind, head_dtype))
    ours.set_weights(keras_weights(theirs))
    policy("float32")
    plain = keras.Sequential(stack(keras.layers, kind))
    plain.set_weights(keras_weights(theirs))
    return theirs, ours, plain


@pytest.mark.parametrize("kind", KINDS)
def test_a_mixed_model_predicts_and_trains_as_keras(keras, policy, kind):
    theirs, ours, plain = model_twins(keras, policy, kind)
    x, y = data()
    expected, got, want = theirs.predict(x, verbose=0), ours.predict(x), plain.predict(x, verbose=0)
    assert dtype_name(got) == dtype_name(expected) == "bfloat16"
    assert dtype_name(ours(x)) == "bfloat16"
    assert error(expected, want) <= FORWARD_BOUND
    assert error(got, want) <= FORWARD_BOUND
    start = keras_weights(plain)
    for model in (theirs, ours, plain):
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss="mse")
        model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    float32_updates = [w - w0 for w, w0 in zip(keras_weights(plain), start)]
    for name, weights in (("Keras's", keras_weights(theirs)), ("rnnfast's", ours.get_weights())):
        for i, (w, w0, d) in enumerate(zip(weights, start, float32_updates)):
            assert w.dtype == np.float32
            assert error(w - w0, d) <= UPDATE_BOUND, f"{name} weight {i}"


def test_a_float32_head_returns_float32_as_keras(keras, policy):
    """Keras's advice for mixed precision: the last layer in float32."""
    theirs, ours, _ = model_twins(keras, policy, "LSTM", head_dtype="float32")
    x, _ = data()
    assert dtype_name(ours.predict(x)) == dtype_name(theirs.predict(x, verbose=0)) == "float32"
    assert type(ours.layers[-1].layer) is nn.Dense  # float32 products
    assert ours.layers[0].layer.precision == "bf16"


def test_a_functional_model_returns_each_output_in_its_layers_dtype(keras, policy):
    x, _ = data()
    inputs = rk.Input((T, D))
    sequence, h, c = rk.LSTM(H, return_sequences=True, return_state=True, dtype="mixed_bfloat16")(
        inputs
    )
    head = rk.Dense(K, dtype="float32")(h)
    model = rk.Model(inputs, [sequence, head, c])
    assert [dtype_name(o) for o in model.predict(x)] == ["bfloat16", "float32", "bfloat16"]
    assert [dtype_name(o) for o in model(x)] == ["bfloat16", "float32", "bfloat16"]


def test_the_policy_survives_save_and_load(keras, policy, tmp_path):
    _, ours, _ = model_twins(keras, policy, "GRU")
    x, _ = data()
    path = tmp_path / "mixed.keras"
    ours.save(path)
    loaded = rk.models.load_model(path)  # under the float32 global policy: the file's
    assert [layer.dtype_policy for layer in loaded.layers] == ["mixed_bfloat16"] * 3
    np.testing.assert_array_equal(numpy(loaded.predict(x)), numpy(ours.predict(x)))
    theirs = keras.models.load_model(path)  # Keras reads the front's file as its own
    assert [layer.dtype_policy.name for layer in theirs.layers] == ["mixed_bfloat16"] * 3
    assert dtype_name(theirs.predict(x, verbose=0)) == "bfloat16"


def test_a_keras_mixed_file_loads_mixed(keras, policy, tmp_path):
    theirs, _, plain = model_twins(keras, policy, "LSTM")
    x, _ = data()
    path = tmp_path / "keras_mixed.keras"
    theirs.save(path)
    ours = rk.models.load_model(path)
    assert [layer.dtype_policy for layer in ours.layers] == ["mixed_bfloat16"] * 3
    got = ours.predict(x)
    assert dtype_name(got) == "bfloat16"
    assert error(got, plain.predict(x, verbose=0)) <= FORWARD_BOUND


@pytest.mark.parametrize("name", ["mixed_float16", "bfloat16", "float16"])
def test_a_policy_rnnfast_cannot_run_is_refused_by_name(keras, policy, name):
    with pytest.raises(ValueError, match=rf"dtype: LSTM got the dtype policy '{name}'.*mixed_bf"):
        rk.LSTM(H, dtype=name)
    with pytest.raises(ValueError, match=rf"'{name}'"):
        rk.Dense(H, dtype=keras.DTypePolicy(name))
    policy(name)
    with pytest.raises(ValueError, match=rf"'{name}' \(Keras's global policy"):
        rk.GRU(H)


def test_a_quantized_policy_is_refused_by_name(keras):
    with pytest.raises(ValueError, match=r"'int8_from_mixed_bfloat16'"):
        rk.SimpleRNN(H, dtype=keras.DTypePolicy("int8_from_mixed_bfloat16"))


def test_without_bf16_products_a_mixed_layer_is_refused_when_built(monkeypatch):
    import rnnfast.precision

    monkeypatch.setattr(rnnfast.precision, "bf16_available", lambda: False)
    x, _ = data()
    for layer in (rk.LSTM(H, dtype="mixed_bfloat16"), rk.Dense(H, dtype="mixed_bfloat16")):
        with pytest.raises(RuntimeError, match=r"precision='bf16'"):
            layer(x)


@pytest.mark.parametrize("inner", ["mixed_bfloat16", "float32"])
def test_a_wrapper_types_its_outputs_by_its_policy_as_keras(keras, policy, inner):
    """Keras's wrappers take the global policy, which types their outputs; the wrapped layer's
    own policy decides the products (a mixed layer under a float32 global policy, and a
    float32 layer under a mixed one)."""
    x, _ = data()
    policy("float32" if inner == "mixed_bfloat16" else "mixed_bfloat16")
    theirs = keras.layers.Bidirectional(keras.layers.GRU(H, dtype=inner))
    ours = rk.Bidirectional(rk.GRU(H, dtype=inner))
    theirs_td = keras.layers.TimeDistributed(keras.layers.Dense(K, dtype=inner))
    ours_td = rk.TimeDistributed(rk.Dense(K, dtype=inner))
    expected, expected_td = theirs(x), theirs_td(x)
    policy("float32")
    plain = keras.layers.Bidirectional(keras.layers.GRU(H))
    plain(x)
    plain.set_weights(theirs.get_weights())
    ours(x)
    ours.set_weights(theirs.get_weights())
    got = ours(x)
    assert dtype_name(got) == dtype_name(expected)
    assert dtype_name(ours_td(x)) == dtype_name(expected_td)
    assert ours.dtype_policy == theirs.dtype_policy.name
    assert ours.layer.precision == ours.precision == ("bf16" if inner != "float32" else "float32")
    assert error(got, plain(x)) <= FORWARD_BOUND


def test_a_wrapper_whose_weights_keras_would_type_otherwise_is_refused(keras, policy):
    policy("float64")
    with pytest.raises(ValueError, match=r"pass dtype= to Bidirectional"):
        rk.Bidirectional(rk.LSTM(H, dtype="mixed_bfloat16"))
    assert rk.Bidirectional(rk.LSTM(H, dtype="mixed_bfloat16"), dtype="float32").precision == "bf16"


def test_float32_layers_are_unchanged(keras, policy):
    """Outside the mixed policy nothing changes: float32 products and outputs."""
    x, _ = data()
    layer = rk.LSTM(H)
    out = layer(x)
    assert layer.dtype_policy == "float32" and out.dtype == np.float32
    assert layer.layer.precision == "float32"
    assert layer.get_config()["dtype"] == "float32"
