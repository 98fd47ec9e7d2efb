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
"""

from __future__ import annotations

import datetime
import io
import json
import os
import tempfile
import zipfile

import numpy as np

__all__ = [
    "compile_from_config",
    "load_weights",
    "read_model_file",
    "read_weights_bytes",
    "save_model",
    "save_weights",
]

_CONFIG, _METADATA, _WEIGHTS = "config.json", "metadata.json", "model.weights.h5"


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


def _read_weights(model, handle, source):
    """Load each layer's weights from Keras's paths (all layers checked before any is set)."""
    from ._layer_configs import layer_keys, weight_paths

    loaded = []
    for layer, key in zip(model.layers, layer_keys(model.layers)):
        paths, _ = weight_paths(layer, key)
        missing = [p for p in paths if p not in handle]
        if missing:
            raise ValueError(
                f"{source}: no weights for {type(layer).__name__} {layer.name!r} (expected "
                f"{missing[0]!r}); the file holds {sorted(handle.get('layers', {}))}"
            )
        arrays = [np.asarray(handle[p]) for p in paths]
        for path, array, current in zip(paths, arrays, layer.get_weights()):
            if array.shape != current.shape:
                raise ValueError(
                    f"{source}: {path!r} has shape {array.shape}, {layer.name!r} expects "
                    f"{current.shape}"
                )
        loaded.append((layer, arrays))
    for layer, arrays in loaded:
        layer.set_weights(arrays)


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
        with zipfile.ZipFile(path) as archive:
            data = archive.read(_WEIGHTS)
        with _h5py().File(io.BytesIO(data), "r") as handle:
            _read_weights(model, handle, path)
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


def read_model_file(path):
    """``(config, weights bytes)`` of a ``.keras`` file."""
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read(_CONFIG)), archive.read(_WEIGHTS)


def read_weights_bytes(model, data, source):
    """Load the weights of a ``.keras`` file's ``model.weights.h5`` (bytes) into ``model``."""
    with _h5py().File(io.BytesIO(data), "r") as handle:
        _read_weights(model, handle, source)


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
