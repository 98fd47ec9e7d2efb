"""Saving and loading layers: ``save`` writes the .npz format (``nn.files._file_format``), ``load``
rebuilds a layer from it through the layer protocol: the class from the name the file records,
found among the subclasses of ``Layer`` already defined (or given as ``cls=``), built by its
``from_config``, its parameters loaded by ``load_state_dict``. ``load`` never imports a module
a file names: that would run code the file chooses.
"""

from __future__ import annotations

import numpy as np

from ..._validation import check_keys
from .._layer import Layer, quantize_layer
from .._mixed_precision import loading_from_file
from ..quantized.formats import MODES
from ._file_format import FORMAT_VERSION, QUANTIZED_KEY, layer_config, read, save

__all__ = ["FORMAT_VERSION", "build_layer", "layer_class", "layer_config", "load", "save"]


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def layer_class(name):
    """The subclass of ``Layer`` named ``name``, among those defined so far: rnnfast's own
    first, then any other of that name if there is exactly one.

    Raises
    ------
    ValueError
        No such class, or several outside rnnfast: the message says to pass ``cls=``.
    """
    found = {c for c in _subclasses(Layer) if c.__name__ == name}
    ours = [c for c in found if c.__module__.split(".")[0] == "rnnfast"]
    if len(ours) == 1:
        return ours[0]
    if len(found) == 1:
        return found.pop()
    why = "several classes have that name" if found else "no layer class of that name is defined"
    raise ValueError(
        f"config: unknown layer class {name!r} ({why}); load never imports a module a file "
        f"names: define or import the class, or pass it: load(path, cls={name})"
    )


def build_layer(config):
    """A new layer (or container) from what :func:`layer_config` returned."""
    config = dict(config)
    return layer_class(config.pop("__class__", "RNN")).from_config(config)


def _is_size(key):
    """Whether a config key names a parameter dimension, as rnnfast's layers name them
    (``input_size``, ``hidden_size``, ``proj_size``, ``in_features``, ``num_embeddings``,
    ``embedding_dim``, ``units``)."""
    return key.endswith(("_size", "_features", "_dim", "_embeddings")) or key == "units"


# counts of layers: each has its own arrays, so a file holds at least as many arrays
_COUNTS = ("num_layers", "transition_layers")


def expected_shapes(where, config, cls=None):
    """``{name: shape}`` of the parameters the layer ``config`` describes (its class's
    ``parameter_shapes``, the layer protocol's), or None when the class does not say. A value
    that cannot be a size is a ValueError naming the file and the value."""
    config = dict(config)
    name = config.pop("__class__", "RNN")
    config.pop(QUANTIZED_KEY, None)
    if cls is None:
        try:
            cls = layer_class(name)
        except ValueError:
            return None  # building it says so, as for any config that builds no layer
    report = getattr(cls, "parameter_shapes", None)
    if report is None:
        return None
    try:
        return report(config)
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"{where}: config does not build a layer ({name}): {exc}") from None


def _check_shapes(where, shapes, arrays, quantized):
    """Refuse a file whose arrays do not have the shapes its config gives its parameters,
    before the layer is built: the parameters the config names must be the file's arrays (a
    quantized copy's keep their weights' names and shapes; its fused biases and scales are
    checked once it is built)."""
    if not quantized:
        check_keys(where, arrays, shapes, missing="parameter(s)", unexpected="entr(y/ies)")
    for name, shape in shapes.items():
        if name not in arrays:
            if quantized and "weight" in name.rsplit(".", 1)[-1]:
                raise ValueError(f"{where}: missing parameter {name!r} (shape {shape})")
            continue
        if arrays[name].shape != tuple(shape):
            raise ValueError(
                f"{where}: {name}: expected shape {tuple(shape)} (the config's), got shape "
                f"{arrays[name].shape}: the config and the arrays disagree (a damaged or edited "
                "file; save the layer again)"
            )


def _check_sizes(where, config, arrays, dims, path="config"):
    """Refuse a config whose sizes the file's arrays cannot hold, before a layer of that size
    is built (its parameters allocated): every size is some parameter's dimension, so none is
    larger than the largest dimension of the file's arrays, and ``num_layers`` is at most the
    number of arrays."""
    for key, value in config.items():
        if isinstance(value, dict):
            _check_sizes(where, value, arrays, dims, f"{path}[{key!r}]")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    _check_sizes(where, item, arrays, dims, f"{path}[{key!r}][{i}]")
        if type(value) is not int:
            continue
        if key in _COUNTS and value > len(arrays):
            raise ValueError(
                f"{where}: {path}[{key!r}]: {value} layers, more than the file's {len(arrays)} "
                "arrays hold"
            )
        if _is_size(key) and value > dims and not dims:
            raise ValueError(
                f"{where}: missing parameter(s): the file holds no arrays, and {path}[{key!r}] "
                f"is {value}"
            )
        if _is_size(key) and value > dims:
            raise ValueError(
                f"{where}: {path}[{key!r}]: {value}, larger than any dimension of the file's "
                f"arrays (at most {dims}): the file cannot hold a layer of that size"
            )


def _check_scales(where, arrays):
    """The int8 format's scales are max|W row| / 127: finite and >= 0."""
    for name, arr in arrays.items():
        if name.endswith("_scale") and arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise ValueError(
                    f"{where}: {name}: int8 scales are finite and >= 0, got "
                    f"{arr[~np.isfinite(arr) | (arr < 0)][0]}"
                )


def load(path, cls=None):
    """A new layer rebuilt from a file that :func:`save` wrote.

    Parameters
    ----------
    path : str, os.PathLike or binary file object
    cls : type, optional
        The layer class, built by ``cls.from_config(config)``. By default the class the file
        names (``rnnfast.RNN`` for files that name none), among the subclasses of
        ``rnnfast.nn.Layer`` defined when ``load`` runs.

    Returns
    -------
    rnnfast.nn.Layer
        In training mode, as a newly constructed layer; a file saved from a quantized copy
        (``rnnfast.quantize``) gives that quantized copy again (in eval mode), its raw bf16 or
        int8 arrays loaded as they were saved.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not an .npz file, truncated or corrupt, an array header that claims more data than the
        file holds, an array of object, structured or subarray dtype, a format
        version this rnnfast does not read, a configuration that is not a JSON object (too
        large or deep, or with NaN in it), a class name no defined layer class has (pass
        ``cls=``), a configuration that does not build a layer or whose sizes (``hidden_size``,
        ``num_layers``, ...) exceed what the file's arrays hold (refused before the layer is
        built), parameters missing, extra or of the wrong shape or dtype, or an int8 copy's
        scales not finite and >= 0. Nothing is returned half-built.
    OSError
        Reading the file failed.
    """
    where, config, arrays = read(path)
    dims = max((max(a.shape, default=1) for a in arrays.values()), default=0)
    _check_sizes(where, config, arrays, dims)
    if cls is not None and config.get("__class__", "RNN") != cls.__name__:
        saved = config.get("__class__", "RNN")
        raise ValueError(f"cls: the file holds a {saved}, got cls={cls.__name__}")
    # every parameter's shape from the config, against the file's arrays, before any is built
    shapes = expected_shapes(where, config, cls)
    if shapes is not None:
        _check_shapes(where, shapes, arrays, config.get(QUANTIZED_KEY) is not None)
    mode = config.pop(QUANTIZED_KEY, None)
    if mode == "int8":
        _check_scales(where, arrays)
    try:
        with loading_from_file():  # a saved precision='bf16' loads on any CPU
            if cls is None:
                layer = build_layer(config)
            else:
                saved = config.pop("__class__", "RNN")
                if saved != cls.__name__:
                    raise ValueError(f"cls: the file holds a {saved}, got cls={cls.__name__}")
                layer = cls.from_config(config) if hasattr(cls, "from_config") else cls(**config)
        if mode is not None:  # the float model the file's raw quantized arrays load into
            if mode not in MODES:
                raise ValueError(f"{QUANTIZED_KEY}: expected one of {MODES}, got {mode!r}")
            layer = quantize_layer(layer, mode, "model")
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"{where}: config {config} does not build a layer: {exc}") from exc

    expected = layer.state_dict()
    check_keys(where, arrays, expected, missing="parameter(s)", unexpected="entr(y/ies)")
    for name, current in expected.items():
        arr = arrays[name]
        if arr.shape != current.shape:
            raise ValueError(
                f"{where}: {name}: expected shape {current.shape}, got shape {arr.shape}"
            )
        if arr.dtype != current.dtype:
            raise ValueError(
                f"{where}: {name}: expected dtype {current.dtype} (the config's), got {arr.dtype}"
            )
    layer.load_state_dict(arrays)
    return layer
