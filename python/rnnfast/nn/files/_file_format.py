"""The .npz file format of saved layers: writing one (``save``) and reading one back into a
configuration and arrays (``read``); ``nn.files.persistence`` builds the layer from them.

Version 1: an uncompressed ``.npz`` (``np.savez``) of plain arrays only:

``__rnnfast_format__``  int64 scalar, the format version (1)
``__rnnfast_config__``  uint8 vector, the UTF-8 JSON of ``layer.get_config()`` (dtype by name),
                        with the class name under ``"__class__"`` (none for an RNN)
``<name>``              every parameter under its PyTorch name (``weight_ih_l0`` ...)

A quantized copy (``rnnfast.quantize``) is saved with its float model's configuration plus
``"__quantized__": "bf16" | "int8"``, and its raw arrays: int8 weights with ``<name>_scale``
(float32, per output row) or bf16 bits (uint16), an RNN's biases as one float32 ``bias_l{k}``.

It loads with ``np.load(path, allow_pickle=False)``, in NumPy alone, without rnnfast. Nothing
here knows a layer class: the layer is asked for its configuration and its state dict.
"""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np

from ...data._json import loads as json_loads
from ._npz import read_npz

__all__ = ["FORMAT_VERSION", "QUANTIZED_KEY", "layer_config", "read", "save"]

FORMAT_VERSION = 1
_FORMAT_KEY = "__rnnfast_format__"
_CONFIG_KEY = "__rnnfast_config__"
# in the config of a quantized copy (rnnfast.quantize): its mode, "bf16" or "int8"
QUANTIZED_KEY = "__quantized__"
# what a file's config may be: far more than any model's (a Sequential's layers nest 2 levels
# per container), far less than a hostile file could claim
MAX_CONFIG_BYTES = 1 << 22
MAX_CONFIG_DEPTH = 64


def layer_config(layer):
    """The constructor arguments that rebuild ``layer``'s architecture, JSON-ready.

    ``layer.get_config()`` (the layer protocol's) with the class's name under ``"__class__"``;
    the dtype is given by name (``"float32"``), NumPy scalars as Python ones.

    Raises
    ------
    TypeError
        A configuration value JSON cannot hold.
    """
    config = dict(layer.get_config())
    if "dtype" in config:
        config["dtype"] = np.dtype(config["dtype"]).name
    # a quantized copy records its float class: load builds that, then quantizes it
    name = (getattr(layer, "float_class", None) or type(layer)).__name__
    if name != "RNN":  # RNN files predate other layers: RNN is the default
        config["__class__"] = name
    scalars = (bool, int, float, str, type(None))
    for key, value in config.items():
        if key == "layers" and isinstance(value, list) and all(isinstance(v, dict) for v in value):
            continue  # a Sequential's layers, each from layer_config already
        if isinstance(value, np.generic):
            value = config[key] = value.item()
        elif isinstance(value, (list, tuple)):
            value = config[key] = [v.item() if isinstance(v, np.generic) else v for v in value]
        if not isinstance(value, scalars) and not (
            isinstance(value, list) and all(isinstance(v, scalars) for v in value)
        ):
            raise TypeError(
                f"config[{key!r}]: expected a JSON scalar or list of them, got "
                f"{type(value).__name__}"
            )
    return config


def save(layer, path):
    """Write ``layer`` (configuration and parameters) to ``path`` as a ``.npz`` file.

    Parameters
    ----------
    layer : rnnfast.nn.Layer
    path : str, os.PathLike or binary file object
        Written exactly as named (no ``.npz`` is appended). A path is written to a temporary
        file beside it and renamed over it, so a failed save never leaves a partial file.

    Raises
    ------
    TypeError
        The configuration holds a value JSON cannot hold.
    ValueError
        A parameter is named like one of the format's own entries.
    """
    if not all(callable(getattr(layer, m, None)) for m in ("state_dict", "get_config")):
        raise TypeError(
            f"layer: expected an rnnfast layer (get_config and state_dict), got "
            f"{type(layer).__name__}"
        )
    config = layer_config(layer)
    if getattr(layer, "quantized", None) is not None:
        config[QUANTIZED_KEY] = layer.quantized  # the arrays are the raw quantized ones
    params = layer.state_dict()
    clash = [k for k in params if k.startswith("__rnnfast")]
    if clash:
        raise ValueError(f"layer: parameter name(s) {clash} clash with the file format's entries")
    text = json.dumps(config, sort_keys=True).encode("utf-8")
    arrays = {
        _FORMAT_KEY: np.array(FORMAT_VERSION, dtype=np.int64),
        _CONFIG_KEY: np.frombuffer(text, dtype=np.uint8),
        **{k: np.ascontiguousarray(v) for k, v in params.items()},
    }
    if hasattr(path, "write"):
        np.savez(path, **arrays)
        return
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".rnnfast-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read(path):
    """``(where, config, arrays)`` of a file :func:`save` wrote: ``where`` names it in messages,
    ``config`` is the JSON object, ``arrays`` the parameters' arrays by name.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not an .npz file, truncated or corrupt, a member whose .npy header claims more data
        than the member holds, an array of object, structured or subarray dtype, a format
        version this rnnfast does not read, a configuration that is not a JSON object (or
        longer than ``MAX_CONFIG_BYTES``, nested deeper than ``MAX_CONFIG_DEPTH``, with NaN
        or Infinity in it).
    OSError
        Reading the file failed.
    """
    where = repr(os.fspath(path)) if not hasattr(path, "read") else "file"
    if hasattr(path, "read"):
        arrays = read_npz(path, where)
    else:
        with open(path, "rb") as f:
            arrays = read_npz(f, where)

    for key in (_FORMAT_KEY, _CONFIG_KEY):
        if key not in arrays:
            raise ValueError(f"{where}: not an rnnfast file (no {key!r} entry)")
    version = arrays.pop(_FORMAT_KEY)
    if version.shape != () or version.dtype.kind not in "iu":
        raise ValueError(
            f"{where}: format version: expected an integer scalar, got dtype {version.dtype} "
            f"shape {version.shape}"
        )
    if int(version) != FORMAT_VERSION:
        newer = " (written by a newer rnnfast?)" if int(version) > FORMAT_VERSION else ""
        raise ValueError(
            f"{where}: format version {int(version)} is not supported{newer}; this rnnfast "
            f"reads version {FORMAT_VERSION}"
        )
    raw = arrays.pop(_CONFIG_KEY)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise ValueError(
            f"{where}: config: expected a uint8 vector, got dtype {raw.dtype} shape {raw.shape}"
        )
    config = json_loads(
        raw.tobytes(), f"{where}: config", max_bytes=MAX_CONFIG_BYTES, max_depth=MAX_CONFIG_DEPTH
    )
    if not isinstance(config, dict):
        raise ValueError(f"{where}: config: expected a JSON object, got {type(config).__name__}")
    return where, config, arrays
