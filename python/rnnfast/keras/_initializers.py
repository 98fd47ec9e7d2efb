"""Keras's initial weights, in Keras's layout: a layer of the front starts where the same Keras
layer would (in distribution), not from PyTorch's initialisation; with a Keras initializer
object (``keras.initializers.Constant(0.01)``, ``GlorotUniform(seed=1)``) or any function
``f(shape, dtype=None)`` given as ``kernel_initializer=`` (...), exactly where Keras's would.

An initializer here is ``init(rng, shape) -> array`` (:func:`initializer`): the names Keras
accepts as strings are computed with the layer's own generator (its ``seed``); a callable is
called as Keras calls it, ``value(shape, dtype=...)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["INITIALIZER_NAMES", "glorot_uniform", "initializer", "orthogonal", "recurrent_weights"]


def _fans(shape):
    """Keras's fan_in, fan_out of a weight shape (a vector: both its size)."""
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return shape[-2] * receptive, shape[-1] * receptive


def _truncated_normal(rng, shape, stddev):
    """N(0, stddev) truncated at two standard deviations (Keras's truncated_normal)."""
    z = rng.standard_normal(shape)
    bad = np.abs(z) > 2.0
    while bad.any():
        z[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(z) > 2.0
    return z * stddev


def _variance_scaling(scale, mode, distribution):
    def init(rng, shape):
        fan_in, fan_out = _fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[mode]
        variance = scale / max(1.0, n)
        if distribution == "uniform":
            limit = np.sqrt(3.0 * variance)
            return rng.uniform(-limit, limit, shape)
        # Keras's truncated normal, its stddev corrected for the truncation
        return _truncated_normal(rng, shape, np.sqrt(variance) / 0.87962566103423978)

    return init


def glorot_uniform(rng, shape):
    """Keras's ``glorot_uniform`` for a kernel (fan_in, fan_out): U(-l, l), l = sqrt(6 / (fan_in
    + fan_out))."""
    limit = np.sqrt(6.0 / (shape[0] + shape[1]))
    return rng.uniform(-limit, limit, shape)


def orthogonal(rng, shape):
    """Keras's ``orthogonal`` for a recurrent kernel (H, G*H): the Q of a QR of a normal matrix,
    its signs fixed by R's diagonal, transposed when it has more columns than rows."""
    rows, cols = shape
    q, r = np.linalg.qr(rng.standard_normal((max(rows, cols), min(rows, cols))))
    q = q * np.sign(np.diag(r))
    return q.T if rows < cols else q


# the names Keras takes as strings (keras.initializers.get), with Keras's default arguments
_NAMED = {
    "zeros": lambda rng, shape: np.zeros(shape),
    "ones": lambda rng, shape: np.ones(shape),
    "glorot_uniform": _variance_scaling(1.0, "fan_avg", "uniform"),
    "glorot_normal": _variance_scaling(1.0, "fan_avg", "normal"),
    "he_uniform": _variance_scaling(2.0, "fan_in", "uniform"),
    "he_normal": _variance_scaling(2.0, "fan_in", "normal"),
    "lecun_uniform": _variance_scaling(1.0, "fan_in", "uniform"),
    "lecun_normal": _variance_scaling(1.0, "fan_in", "normal"),
    "orthogonal": orthogonal,
    "random_uniform": lambda rng, shape: rng.uniform(-0.05, 0.05, shape),
    "random_normal": lambda rng, shape: rng.normal(0.0, 0.05, shape),
    "truncated_normal": lambda rng, shape: _truncated_normal(rng, shape, 0.05),
}
INITIALIZER_NAMES = tuple(_NAMED)
_ALIASES = {"zero": "zeros", "one": "ones", "uniform": "random_uniform", "normal": "random_normal"}


def _to_array(value):
    value = getattr(value, "value", value)  # a Keras variable: its backend tensor
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float64)


def initializer(name, value, dtype):
    """``init(rng, shape)`` of a Keras ``*_initializer`` argument: a name Keras takes as a
    string (any case, ``"GlorotUniform"`` too), a Keras initializer object or any callable
    ``f(shape, dtype=None)`` (called as Keras calls it), or a Keras config dict (read by Keras).

    Raises
    ------
    ValueError
        An unknown name, or a callable whose array has another shape than asked.
    TypeError
        Anything else.
    """
    if isinstance(value, dict):  # a serialized Keras initializer (a saved config)
        return _serialized(name, value, dtype)
    if isinstance(value, str):
        key = value.lower()
        key = _ALIASES.get(key, key)
        if key not in _NAMED:  # Keras's class names: GlorotUniform -> glorot_uniform
            snake = "".join("_" + c.lower() if c.isupper() else c for c in value).lstrip("_")
            key = _ALIASES.get(snake, snake)
        if key not in _NAMED:
            raise ValueError(
                f"{name}: expected one of {sorted(_NAMED)}, a Keras initializer object or a "
                f"function f(shape, dtype=None), got {value!r}"
            )
        return _NAMED[key]
    if callable(value):
        dtype_name = np.dtype(dtype).name

        def init(rng, shape):
            array = _to_array(value(tuple(shape), dtype=dtype_name))
            if array.shape != tuple(shape):
                raise ValueError(
                    f"{name}: {value!r} returned an array of shape {array.shape} for the "
                    f"weight of shape {tuple(shape)}"
                )
            return array

        return init
    raise TypeError(
        f"{name}: expected an initializer name such as 'glorot_uniform', a Keras initializer "
        f"object or a function f(shape, dtype=None), got {type(value).__name__}"
    )


def _serialized(name, value, dtype):
    """``init(rng, shape)`` of a Keras initializer's config ``{"class_name", "config", ...}``:
    its form is checked now without importing Keras; Keras rebuilds the object when the
    initializer is first called (a loaded model's weights come from its file, so loading
    calls none)."""
    class_name, config = value.get("class_name"), value.get("config", {})
    if not isinstance(class_name, str) or not isinstance(config, (dict, str)):
        raise ValueError(
            f"{name}: expected a Keras initializer config {{'class_name': str, 'config': "
            f"dict}}, got {value!r:.200}"
        )
    built = []

    def init(rng, shape):
        if not built:
            import keras

            built.append(initializer(name, keras.initializers.deserialize(value), dtype))
        return built[0](rng, shape)

    return init


def recurrent_weights(
    rng,
    input_size,
    units,
    gates,
    bias,
    *,
    bias_rows=1,
    forget_bias=False,
    kernel=glorot_uniform,
    recurrent=orthogonal,
    bias_init=None,
):
    """``[kernel (D, G*H), recurrent_kernel (H, G*H)(, bias)]`` of one direction of a Keras
    recurrent layer from its three initializers (Keras's defaults: glorot, orthogonal, zeros);
    an LSTM's forget gate bias 1 with ``unit_forget_bias`` (Keras's gate order i, f, c, o: the
    bias initializer gives the other gates' parts); a GRU with ``reset_after`` has two bias
    rows."""
    weights = [kernel(rng, (input_size, gates * units)), recurrent(rng, (units, gates * units))]
    if bias:
        bias_init = _NAMED["zeros"] if bias_init is None else bias_init
        if forget_bias:
            b = np.concatenate(
                [bias_init(rng, (units,)), np.ones(units), bias_init(rng, (2 * units,))]
            )
        else:
            b = bias_init(rng, (bias_rows, gates * units) if bias_rows > 1 else (gates * units,))
        weights.append(b)
    return weights
