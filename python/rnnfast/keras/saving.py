"""Keras 3's files for the front's models: ``model.save("m.keras")``,
``save_weights("m.weights.h5")`` and ``load_weights``, and what
``rnnfast.keras.models.load_model("m.keras")`` reads them with.

The ``.keras`` file is Keras 3's zip: ``metadata.json``, ``config.json`` (the Sequential's
config with each layer's, in Keras's form, and the compile config: optimizer, loss, metrics)
and ``model.weights.h5`` (each layer's weights at Keras's paths). Real Keras loads a file the
front wrote, and the front loads a file real Keras wrote for the layers it has. A model
compiled when saved comes back compiled, so ``fit`` goes on at once (the optimizer's moments
start afresh: the file keeps its step count and learning rate only, as a Keras model saved
before training does). ``.weights.h5`` is Keras's weights file alone; Keras insists on that
suffix, and so does the front.

Reading a file trusts none of its numbers (issue 43): every size a layer's config gives
(``units``, an Embedding's ``input_dim`` / ``output_dim``, the input's features) is compared
with the shapes of the file's arrays before anything is built or read, and an array must be
held by the file (a dataset may not claim more bytes than it stores). The sizes no array
carries have bounds: a zip member may expand at most :data:`MAX_EXPANSION` times (Keras 3's
own rule), ``config.json`` holds at most :data:`MAX_CONFIG_BYTES` and nests at most
:data:`MAX_CONFIG_DEPTH` levels, the input's batch size is at most :data:`MAX_BATCH_SIZE`
and its other sizes (timesteps) at most :data:`MAX_DIMENSION`. What a file gets wrong is a
ValueError naming the field, what was expected and what the file holds.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import tempfile
import zipfile

import numpy as np

from ..nn.files._npz import ZIP_ERRORS

__all__ = [
    "MAX_BATCH_SIZE",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_DIMENSION",
    "MAX_EXPANSION",
    "checked_batch_shape",
    "compile_from_config",
    "read_checked_weights",
    "load_weights",
    "read_model_file",
    "read_weights_bytes",
    "save_model",
    "save_weights",
]

_CONFIG, _METADATA, _WEIGHTS = "config.json", "metadata.json", "model.weights.h5"

#: The most a zip member may expand (its size over its compressed size), as Keras 3 allows.
MAX_EXPANSION = 100
#: The largest ``config.json`` read (bytes).
MAX_CONFIG_BYTES = 16 << 20
#: The deepest nesting of lists and dicts in ``config.json``.
MAX_CONFIG_DEPTH = 32
#: The largest fixed batch size of a loaded model's input (a stateful layer's state rows).
MAX_BATCH_SIZE = 1 << 16
#: The largest other size of a loaded model's input (timesteps, features).
MAX_DIMENSION = 1 << 24


def _h5py():
    try:
        import h5py
    except ImportError as error:  # pragma: no cover - h5py is a dependency of the format
        raise ImportError(
            "Keras's .keras and .weights.h5 files need h5py: pip install h5py"
        ) from error
    return h5py


def _path(filepath, what):
    if not isinstance(filepath, (str, os.PathLike)):
        raise TypeError(f"filepath: expected a str or os.PathLike, got {type(filepath).__name__}")
    return os.fspath(filepath)


def _check_overwrite(path, overwrite):
    if not isinstance(overwrite, bool):
        raise TypeError(f"overwrite: expected a bool, got {type(overwrite).__name__}")
    if not overwrite and os.path.exists(path):
        raise FileExistsError(
            f"filepath: {path!r} exists and overwrite=False (Keras would ask on the terminal); "
            "pass overwrite=True or another path"
        )


# ---- the weights file ---------------------------------------------------------------------------


def _write_weights(model, handle, optimizer=None):
    """Each layer's weights at Keras's paths (``layers/<name>/...``) into an open h5 file."""
    from ._layer_configs import layer_keys, weight_paths

    handle.create_group("vars").attrs["name"] = model.name
    handle.create_group("layers")
    for layer, key in zip(model.layers, layer_keys(model.layers)):
        paths, groups = weight_paths(layer, key)
        for group in groups:
            handle.require_group(group)
        for path, value in zip(paths, layer.get_weights()):
            handle.create_dataset(path, data=np.asarray(value, dtype=layer.dtype))
    if optimizer is not None:  # what Keras writes for an optimizer not yet stepped
        group = handle.create_group("optimizer/vars")
        group.create_dataset("0", data=np.int64(optimizer.step_count))
        group.create_dataset("1", data=np.float32(optimizer.learning_rate))


def _group_names(handle):
    group = handle.get("layers")
    return sorted(group) if isinstance(group, _h5py().Group) else []


def read_checked_weights(handle, layers, shapes, source, size):
    """Each layer's arrays from an open weights file, at Keras's paths: every dataset's
    presence, kind, shape (against ``shapes``, one list per layer, from the layers' configs)
    and storage (``size``: the bytes of the file) checked before any is read."""
    from ._layer_configs import layer_keys, weight_paths

    h5py = _h5py()
    found, total = [], 0
    for layer, key, expected in zip(layers, layer_keys(layers), shapes):
        paths, _ = weight_paths(layer, key, len(expected))
        datasets = []
        for path, shape in zip(paths, expected):
            try:
                dataset = handle.get(path)
            except (KeyError, ValueError, OSError, TypeError):
                dataset = None
            if not isinstance(dataset, h5py.Dataset):
                raise ValueError(
                    f"{source}: no weights for {type(layer).__name__} {layer.name!r} (expected "
                    f"a dataset at {path!r}); the file holds {_group_names(handle)}"
                )
            if dataset.shape != tuple(shape):
                raise ValueError(
                    f"{source}: {path!r} has shape {dataset.shape}, {type(layer).__name__} "
                    f"{layer.name!r} expects {tuple(shape)} (from its config)"
                )
            if dataset.dtype.kind not in "fiu" or dataset.dtype.itemsize > 8:
                raise ValueError(
                    f"{source}: {path!r} holds {dataset.dtype}, expected floats (the weights "
                    f"of {layer.name!r})"
                )
            stored = dataset.id.get_storage_size()
            filtered = dataset.id.get_create_plist().get_nfilters() > 0
            claimed = dataset.size * dataset.dtype.itemsize
            if stored > size or claimed > (MAX_EXPANSION if filtered else 1) * stored:
                raise ValueError(
                    f"{source}: {path!r} claims {claimed} bytes of shape {dataset.shape} and "
                    f"stores {stored} in a file of {size}; expected the data in the file"
                )
            total += claimed
            datasets.append(dataset)
        found.append(datasets)
    if total > MAX_EXPANSION * size:
        raise ValueError(
            f"{source}: the weights claim {total} bytes in a file of {size}; expected at most "
            f"{MAX_EXPANSION}x the file"
        )
    return [[np.asarray(d) for d in datasets] for datasets in found]


def _read_weights(model, handle, source, size=None):
    """Load each layer's weights from Keras's paths (all layers checked before any is set)."""
    layers = model.layers
    size = handle.id.get_filesize() if size is None else size
    shapes = [[w.shape for w in layer.get_weights()] for layer in layers]
    arrays = read_checked_weights(handle, layers, shapes, source, size)
    for layer, weights in zip(layers, arrays):
        layer.set_weights(weights)


def save_weights(model, filepath, overwrite=True):
    """Keras's ``model.save_weights(filepath)``: ``filepath`` must end in ``.weights.h5``."""
    path = _path(filepath, "filepath")
    if not path.endswith(".weights.h5"):
        raise ValueError(
            f"filepath: the filename must end in `.weights.h5` (as Keras 3 asks), got {path!r}"
        )
    model.model  # noqa: B018 - built, or the error that says how
    _check_overwrite(path, overwrite)
    with _h5py().File(path, "w") as handle:
        _write_weights(model, handle)


def load_weights(model, filepath):
    """Keras's ``model.load_weights(filepath)``: a ``.weights.h5`` file or the weights of a
    ``.keras`` file into the built model, each layer's weights found as Keras finds them (by
    class and position, see ``_layer_configs.layer_keys``)."""
    path = _path(filepath, "filepath")
    model.model  # noqa: B018 - built, or the error that says how
    if path.endswith(".keras"):
        _, data = read_model_file(path, config=False)
        read_weights_bytes(model, data, path)
        return
    if not path.endswith(".weights.h5"):
        raise ValueError(
            f"filepath: expected a .weights.h5 or .keras file (Keras 3's formats), got {path!r}"
        )
    with _h5py().File(path, "r") as handle:
        _read_weights(model, handle, path)


# ---- the .keras file ----------------------------------------------------------------------------


def _compile_config(model):
    from ._keras_objects import is_keras_object
    from .optimizers import Optimizer

    if model._compiled is None:
        return None
    spec, loss, metrics = model._compiled
    if isinstance(spec, Optimizer):
        optimizer = {
            "module": "keras.optimizers",
            "class_name": type(spec).__name__,
            "config": dict(vars(spec)),
            "registered_name": None,
        }
    else:  # an rnnfast.optim optimizer: not Keras's, kept under rnnfast's name
        optimizer = {
            "module": "rnnfast.optim",
            "class_name": type(spec).__name__,
            "config": spec.hyperparameters,
        }
    return {
        "optimizer": optimizer,
        "loss": _serialized(loss) if is_keras_object(loss) else loss,
        "metrics": [_serialized(m) if is_keras_object(m) else m for m in metrics] or None,
        "loss_weights": None,
        "weighted_metrics": None,
        "run_eagerly": None,
        "steps_per_execution": 1,
        "jit_compile": False,
    }


def _serialized(obj):
    if not hasattr(obj, "get_config"):  # a keras.losses function: Keras stores its name
        return obj.__name__
    config = dict(obj.get_config())
    config.update(getattr(obj, "_fn_kwargs", {}) or {})
    module = "keras.metrics" if "dtype" in config and "reduction" not in config else "keras.losses"
    return {
        "module": module,
        "class_name": type(obj).__name__,
        "config": config,
        "registered_name": None,
    }


def model_config(model):
    """The Sequential's ``config.json`` in Keras 3's form."""
    from ._layer_configs import to_config

    layers = [to_config(layer) for layer in model.layers]
    shape = model._input_shape
    if shape is not None:
        dtype = np.dtype(model.layers[0].dtype).name if model.layers else "float32"
        if type(model.layers[0]).__name__ == "Embedding":
            dtype = "int64"
        layers.insert(
            0,
            {
                "module": "keras.layers",
                "class_name": "InputLayer",
                "config": {"batch_shape": list(shape), "dtype": dtype, "name": "input_layer"},
                "registered_name": None,
            },
        )
    config = {
        "module": "keras",
        "class_name": "Sequential",
        "config": {"name": model.name, "trainable": True, "layers": layers},
        "registered_name": None,
    }
    if shape is not None:
        config["config"]["build_input_shape"] = list(shape)
        config["build_config"] = {"input_shape": list(shape)}
    compiled = _compile_config(model)
    if compiled is not None:
        config["compile_config"] = compiled
    return config


def save_model(model, filepath, overwrite=True, zipped=None):
    """Keras's ``model.save(filepath)``: a ``.keras`` file (Keras 3's format)."""
    path = _path(filepath, "filepath")
    if zipped not in (None, True):
        raise NotImplementedError("zipped=False: the front writes the zipped .keras file only")
    if path.endswith(".h5") or path.endswith(".hdf5"):
        raise NotImplementedError(
            f"filepath: {path!r} asks for Keras 2's legacy HDF5 format; save to a .keras file "
            "(or the weights alone with save_weights('....weights.h5'))"
        )
    if not path.endswith(".keras"):
        raise ValueError(f"filepath: expected a .keras extension (Keras 3's format), got {path!r}")
    model.model  # noqa: B018 - built, or the error that says how
    _check_overwrite(path, overwrite)
    metadata = {
        "keras_version": "3.15.1",  # the Keras whose format this is
        "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
        "saved_by": "rnnfast.keras",
    }
    with tempfile.TemporaryDirectory() as tmp:
        weights = os.path.join(tmp, _WEIGHTS)
        with _h5py().File(weights, "w") as handle:
            _write_weights(model, handle, model.optimizer)
        staging = os.path.join(tmp, "model.keras")
        with zipfile.ZipFile(staging, "w") as archive:
            archive.writestr(_METADATA, json.dumps(metadata))
            archive.writestr(_CONFIG, json.dumps(model_config(model)))
            archive.write(weights, _WEIGHTS)
        os.replace(staging, path) if _same_device(tmp, path) else _copy(staging, path)


def _same_device(tmp, path):
    try:
        return os.stat(tmp).st_dev == os.stat(os.path.dirname(os.path.abspath(path))).st_dev
    except OSError:
        return False


def _copy(source, path):
    with open(source, "rb") as src, open(path, "wb") as dst:
        dst.write(src.read())


def _member(archive, name, path, length, limit=None):
    """A zip member's bytes, its claimed sizes checked first (no zip bomb, no size past the
    archive's)."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise ValueError(
            f"{path}: no {name} in the archive (a .keras file holds {_CONFIG} and {_WEIGHTS})"
        ) from None
    if info.compress_size > length or info.file_size > MAX_EXPANSION * info.compress_size + 1024:
        raise ValueError(
            f"{path}: {name} claims {info.file_size} bytes from {info.compress_size} in an "
            f"archive of {length}; expected at most {MAX_EXPANSION}x its compressed size"
        )
    if limit is not None and info.file_size > limit:
        raise ValueError(f"{path}: {name} has {info.file_size} bytes, expected at most {limit}")
    return archive.read(info)


def _depth(value):
    """How deep lists and dicts nest in ``value`` (iteratively: no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_CONFIG_DEPTH:
                break
            stack.extend(
                (v, depth + 1) for v in (node.values() if isinstance(node, dict) else node)
            )
    return deepest


def read_model_file(path, config=True):
    """``(config, weights bytes)`` of a ``.keras`` file (``config`` False: None for it).

    Raises
    ------
    ValueError
        Not a zip archive, damaged, a member missing or larger than its bounds, or
        ``config.json`` not JSON or nested deeper than :data:`MAX_CONFIG_DEPTH`.
    """
    try:
        length = os.path.getsize(path)
        with zipfile.ZipFile(path) as archive:
            weights = _member(archive, _WEIGHTS, path, length)
            text = _member(archive, _CONFIG, path, length, MAX_CONFIG_BYTES) if config else None
    except (*ZIP_ERRORS, RuntimeError) as error:  # RuntimeError: an encrypted member
        raise ValueError(f"{path}: not a readable .keras (zip) file: {error}") from None
    if text is None:
        return None, weights
    try:
        parsed = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ValueError(f"{path}: {_CONFIG} is not JSON: {str(error):.200}") from None
    if _depth(parsed) > MAX_CONFIG_DEPTH:
        raise ValueError(
            f"{path}: {_CONFIG} nests lists and dicts more than {MAX_CONFIG_DEPTH} levels deep"
        )
    return parsed, weights


def open_weights(data, source):
    """An open h5 file of a weights file's bytes; a ValueError when h5py cannot read it."""
    try:
        return _h5py().File(io.BytesIO(data), "r")
    except (OSError, ValueError) as error:
        raise ValueError(f"{source}: {_WEIGHTS} is not an HDF5 file: {error}") from None


def read_weights_bytes(model, data, source):
    """Load the weights of a ``.keras`` file's ``model.weights.h5`` (bytes) into ``model``."""
    with open_weights(data, source) as handle:
        _read_weights(model, handle, source, len(data))


def checked_batch_shape(shape, where):
    """A file's input shape (with the batch axis) as a tuple, each size checked: an int or
    None, positive, the batch size at most :data:`MAX_BATCH_SIZE` and the others at most
    :data:`MAX_DIMENSION`."""
    if not isinstance(shape, (list, tuple)) or not 2 <= len(shape) <= 8:
        raise ValueError(
            f"{where}: expected [batch, ...sizes] (2 to 8 entries, ints or null), got "
            f"{shape!r:.200}"
        )
    for i, size in enumerate(shape):
        bound = MAX_BATCH_SIZE if i == 0 else MAX_DIMENSION
        if size is not None and (
            type(size) is not int or not 1 <= size <= bound  # noqa: E721 - no bool, no float
        ):
            raise ValueError(
                f"{where}[{i}]: expected null or an int in [1, {bound}] (the "
                f"{'batch size' if i == 0 else 'size'}), got {size!r:.100}"
            )
    return tuple(shape)


def compile_from_config(model, compiled):
    """Compile ``model`` as a ``.keras`` file's ``compile_config`` says."""
    from .. import optim
    from . import optimizers
    from ._keras_objects import metric_from_config

    spec = compiled.get("optimizer")
    if isinstance(spec, dict) and spec.get("module") == "rnnfast.optim":
        optimizer = getattr(optim, spec["class_name"])(model, **spec["config"])
    elif isinstance(spec, dict):
        optimizer = optimizers.from_config(spec["class_name"], spec.get("config", {}))
    else:
        optimizer = spec  # a name
    for key in ("loss_weights", "weighted_metrics"):
        if compiled.get(key):
            raise NotImplementedError(f"load_model: the file's compile config has {key}")
    metrics = [
        metric_from_config(m["class_name"], m.get("config", {})) if isinstance(m, dict) else m
        for m in compiled.get("metrics") or []
    ]
    model.compile(optimizer=optimizer, loss=compiled.get("loss"), metrics=metrics)
