"""Saving and loading layers (.npz, no pickle) and the Keras-style summary table.

File format, version 1: an uncompressed ``.npz`` (``np.savez``) of plain arrays only:

``__rnnfast_format__``  int64 scalar, the format version (1)
``__rnnfast_config__``  uint8 vector, the UTF-8 JSON of ``layer.get_config()`` (dtype by name)
``<name>``              every parameter under its PyTorch name (``weight_ih_l0`` ...)

A quantized copy (``rnnfast.quantize``) is saved with its float model's configuration plus
``"__quantized__": "bf16" | "int8"``, and its raw arrays: int8 weights with ``<name>_scale``
(float32, per output row) or bf16 bits (uint16), an RNN's biases as one float32 ``bias_l{k}``.

It loads with ``np.load(path, allow_pickle=False)``, in NumPy alone, without rnnfast.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import tokenize
import zipfile
import zlib

import numpy as np

__all__ = ["save", "load", "layer_config", "summary_text", "FORMAT_VERSION"]

FORMAT_VERSION = 1
_FORMAT_KEY = "__rnnfast_format__"
_CONFIG_KEY = "__rnnfast_config__"
# in the config of a quantized copy (rnnfast.quantize): its mode, "bf16" or "int8"
_QUANTIZED_KEY = "__quantized__"

# the configuration a layer has before it offers get_config()
_BASIC_CONFIG = (
    "input_size",
    "hidden_size",
    "num_layers",
    "nonlinearity",
    "bias",
    "batch_first",
    "dropout",
    "bidirectional",
    "dtype",
)


def layer_config(layer):
    """The constructor arguments that rebuild ``layer``'s architecture, JSON-ready.

    ``layer.get_config()`` where the layer has it, else its basic attributes; the dtype is
    given by name (``"float32"``), NumPy scalars as Python ones.

    Raises
    ------
    TypeError
        A configuration value JSON cannot hold.
    """
    if hasattr(layer, "get_config"):
        config = dict(layer.get_config())
    else:
        config = {name: getattr(layer, name) for name in _BASIC_CONFIG}
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
    layer : rnnfast.RNN
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
    if not (hasattr(layer, "state_dict") and callable(layer.state_dict)):
        raise TypeError(f"layer: expected an rnnfast layer, got {type(layer).__name__}")
    config = layer_config(layer)
    if getattr(layer, "quantized", None) is not None:
        config[_QUANTIZED_KEY] = layer.quantized  # the arrays are the raw quantized ones
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


def _layer_classes():
    from ..nn.dropout import Dropout
    from ..nn.embedding import Embedding
    from ..nn.jordan import JordanRNN
    from ..nn.linear import Linear
    from ..nn.rnn import RNN
    from ..nn.sequential import Sequential

    return {c.__name__: c for c in (RNN, Linear, Embedding, Dropout, Sequential, JordanRNN)}


def build_layer(config):
    """A new layer (or Sequential) from what :func:`layer_config` returned."""
    config = dict(config)
    name = config.pop("__class__", "RNN")
    classes = _layer_classes()
    if name not in classes:
        raise ValueError(
            f"config: unknown layer class {name!r}; known: {sorted(classes)} "
            f"(a model class of your own: load(path, cls={name}))"
        )
    cls = classes[name]
    return cls.from_config(config) if hasattr(cls, "from_config") else cls(**config)


def output_shape(layer, input_shape):
    """The output shape of ``layer`` for ``input_shape`` (batch first, None for unknown sizes),
    as Keras's summary shows it."""
    if hasattr(layer, "output_shape"):
        return layer.output_shape(input_shape)
    width = layer.output_size  # an RNN: the last layer's merged width
    if getattr(layer, "return_sequences", None) is False:
        return (input_shape[0], width)
    return tuple(input_shape[:-1]) + (width,)


def keras_param_count(layer):
    """An RNN's parameters in Keras's layout: one bias vector per direction, not two."""
    groups, others = _groups(layer)
    return sum(_keras_count(g) for g in groups.values()) + sum(p.size for p in others.values())


def _read_arrays(source, where):
    """Every array of the .npz, read fully; anything unreadable is a ValueError."""
    try:
        data = np.load(source, allow_pickle=False)
        if not hasattr(data, "files"):
            raise ValueError("a single .npy array, not an .npz archive")
        with data:
            return {name: data[name] for name in data.files}
    # A damaged archive can fail in many ways inside zipfile and NumPy's header parser
    # (encrypted or unsupported entries, malformed .npy headers): all mean "not readable".
    except (
        ValueError,
        zipfile.BadZipFile,
        zlib.error,
        EOFError,
        KeyError,
        OSError,
        RuntimeError,
        NotImplementedError,
        SyntaxError,
        tokenize.TokenError,
    ) as exc:
        if isinstance(exc, (FileNotFoundError, IsADirectoryError, PermissionError)):
            raise
        raise ValueError(
            f"{where}: not a readable rnnfast file (truncated or corrupt?): {exc}"
        ) from exc


def load(path, cls=None):
    """A new layer rebuilt from a file that :func:`save` wrote.

    Parameters
    ----------
    path : str, os.PathLike or binary file object
    cls : type, optional
        The layer class (``rnnfast.RNN`` by default), called as ``cls(**config)``.

    Returns
    -------
    rnnfast.RNN
        In training mode, as a newly constructed layer; a file saved from a quantized copy
        (``rnnfast.quantize``) gives that quantized copy again (in eval mode), its raw bf16 or
        int8 arrays loaded as they were saved.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not an .npz file, truncated or corrupt, a format version this rnnfast does not read,
        a configuration that does not build a layer, or parameters missing, extra or of the
        wrong shape or dtype. Nothing is returned half-built.
    """
    where = repr(os.fspath(path)) if not hasattr(path, "read") else "file"
    if hasattr(path, "read"):
        arrays = _read_arrays(path, where)
    else:
        with open(path, "rb") as f:
            arrays = _read_arrays(f, where)

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
    try:
        config = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{where}: config: not valid UTF-8 JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise ValueError(f"{where}: config: expected a JSON object, got {type(config).__name__}")
    mode = config.pop(_QUANTIZED_KEY, None)
    try:
        if cls is None:
            layer = build_layer(config)
        else:
            saved = config.pop("__class__", "RNN")
            if saved != cls.__name__:
                raise ValueError(f"cls: the file holds a {saved}, got cls={cls.__name__}")
            layer = cls.from_config(config) if hasattr(cls, "from_config") else cls(**config)
        if mode is not None:  # the float model the file's raw quantized arrays load into
            from ..quantize import quantize

            layer = quantize(layer, mode)
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"{where}: config {config} does not build a layer: {exc}") from exc

    expected = layer.state_dict()
    missing = [k for k in expected if k not in arrays]
    extra = [k for k in arrays if k not in expected]
    if missing:
        raise ValueError(f"{where}: missing parameter(s) {missing}")
    if extra:
        raise ValueError(f"{where}: unexpected entr(y/ies) {extra}")
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


# ---- summary -------------------------------------------------------------------------------------

_PARAM = re.compile(r"^(weight|bias)_(ih|hh)_l(\d+)(_reverse)?$")


def _groups(layer):
    """{(layer index, reverse): {kind: array}} from the named parameters; others apart."""
    groups, others = {}, {}
    for name, p in layer.named_parameters():
        m = _PARAM.match(name)
        if m is None:
            others[name] = p
            continue
        key = (int(m.group(3)), m.group(4) is not None)
        groups.setdefault(key, {})[f"{m.group(1)}_{m.group(2)}"] = p
    return groups, others


def _keras_count(group):
    """Keras's count for one direction: kernel, recurrent kernel and one bias vector."""
    n = group["weight_ih"].size + group["weight_hh"].size
    if "bias_ih" in group or "bias_hh" in group:
        n += next(group[k] for k in ("bias_ih", "bias_hh") if k in group).size
    return n


def summary_text(layer):
    """A Keras-style table of ``layer``: one row per stacked layer (both directions together),
    its output shape and its parameter count in Keras's layout (one bias vector per direction,
    so the totals equal Keras's ``SimpleRNN`` / ``Bidirectional`` counts), then the total in
    PyTorch's layout (two bias vectors, ``bias_ih`` and ``bias_hh``), which rnnfast stores.

    Returns
    -------
    str
    """
    groups, others = _groups(layer)
    H = layer.hidden_size
    dirs = 2 if getattr(layer, "bidirectional", False) else 1
    batch_first = getattr(layer, "batch_first", False)
    last = layer.num_layers - 1
    merge_mode = getattr(layer, "merge_mode", "concat")
    # None: PyTorch's convention, the whole sequence
    return_sequences = getattr(layer, "return_sequences", None) is not False

    rows = [("Layer (type)", "Output Shape", "Param #")]
    keras_total = 0
    for k in range(layer.num_layers):
        count = sum(_keras_count(g) for (i, _), g in groups.items() if i == k)
        keras_total += count
        width = H * dirs if (k < last or merge_mode == "concat") else H
        if k == last and not return_sequences:
            shape = f"(B, {width})"
        else:
            shape = f"(B, T, {width})" if batch_first else f"(T, B, {width})"
        kind = "Bidirectional RNN" if dirs == 2 else "RNN"
        # Keras's dropout / recurrent_dropout (rnnfast's input_ / recurrent_dropout) shown
        # where set: they change what training computes, not the parameters
        drops = "".join(
            f", {keras_name} {getattr(layer, ours)}"
            for keras_name, ours in (
                ("dropout", "input_dropout"),
                ("recurrent_dropout", "recurrent_dropout"),
            )
            if getattr(layer, ours, 0.0)
        )
        rows.append((f"rnn_l{k} ({kind}, {layer.nonlinearity}{drops})", shape, f"{count:,}"))
    other_total = sum(p.size for p in others.values())
    if others:
        rows.append(("other parameters", "", f"{other_total:,}"))
        keras_total += other_total
    torch_total = sum(p.size for p in layer.parameters())

    widths = [max(len(r[i]) for r in rows) + 3 for i in range(3)]
    width = sum(widths)

    def fmt(row):
        return " " + "".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()

    lines = [f'Model: "{type(layer).__name__}"', "_" * width, fmt(rows[0]), "=" * width]
    for i, row in enumerate(rows[1:]):
        lines.append(fmt(row))
        lines.append("=" * width if i == len(rows) - 2 else "_" * width)
    lines.append(f"Total params: {keras_total:,}")
    if getattr(layer, "bias", True) and torch_total != keras_total:
        lines.append(
            f"PyTorch layout: {torch_total:,} params (rnnfast stores two bias vectors per "
            "direction, bias_ih and bias_hh; Keras's one bias is their sum)"
        )
    else:
        lines.append(f"PyTorch layout: {torch_total:,} params (no biases)")
    return "\n".join(lines)
