"""Saving and loading layers: ``save`` writes the .npz format (``nn._file_format``), ``load``
rebuilds a layer from it through the layer protocol: the class from the name the file records,
found among the subclasses of ``Layer`` already defined (or given as ``cls=``), built by its
``from_config``, its parameters loaded by ``load_state_dict``. ``load`` never imports a module
a file names: that would run code the file chooses.
"""

from __future__ import annotations

from .._validation import check_keys
from ._file_format import FORMAT_VERSION, QUANTIZED_KEY, layer_config, read, save
from ._layer import Layer, quantize_layer
from .quantized_formats import MODES

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
        Not an .npz file, truncated or corrupt, a format version this rnnfast does not read,
        a class name no defined layer class has (pass ``cls=``), a configuration that does not
        build a layer, or parameters missing, extra or of the wrong shape or dtype. Nothing is
        returned half-built.
    """
    where, config, arrays = read(path)
    mode = config.pop(QUANTIZED_KEY, None)
    try:
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
