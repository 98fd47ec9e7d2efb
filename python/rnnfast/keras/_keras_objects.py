"""Keras's own objects given to the front (``keras.optimizers.Adam(...)``,
``keras.losses.Huber(...)``, ``keras.metrics.MeanAbsoluteError()``, a loss function of
``keras.losses``), read through their ``get_config()`` into the front's equivalents.

Every option of the config is either mapped or refused: an option with a value rnnfast cannot
honour raises, naming the option, the values accepted and the fix; nothing is dropped.
Keras is never imported here (the objects are recognised by their module), so the same
functions read the configs stored in a ``.keras`` file.
"""

from __future__ import annotations

__all__ = [
    "is_keras_object",
    "loss_from_config",
    "loss_from_keras",
    "metric_from_config",
    "metric_from_keras",
    "optimizer_from_config",
    "optimizer_from_keras",
]


def is_keras_object(obj):
    """Whether ``obj`` is an object of the keras package, or one of its functions."""
    if isinstance(obj, type):
        return False
    if hasattr(obj, "get_config"):
        module = type(obj).__module__
    else:
        module = getattr(obj, "__module__", None) if callable(obj) else None
    return isinstance(module, str) and (module == "keras" or module.startswith("keras."))


def _refuse(what, key, value, accepted, fix=""):
    raise NotImplementedError(
        f"{what}: {key}={value!r} has no rnnfast equivalent; accepted: {accepted}"
        + (f"; {fix}" if fix else "")
    )


# ---- optimizers ---------------------------------------------------------------------------------

# Keras's config keys that change nothing while at these values
_OPTIMIZER_INERT = {
    "use_ema": False,
    "loss_scale_factor": None,
    "gradient_accumulation_steps": None,
    "amsgrad": False,
}
# keys read only when another is set (EMA's), or only for naming
_OPTIMIZER_IGNORED = ("ema_momentum", "ema_overwrite_frequency")
_COMMON = ("clipnorm", "global_clipnorm", "clipvalue", "weight_decay", "name")
_OWN = {
    "SGD": ("learning_rate", "momentum", "nesterov"),
    "Adam": ("learning_rate", "beta_1", "beta_2", "epsilon"),
    "AdamW": ("learning_rate", "beta_1", "beta_2", "epsilon"),
    "RMSprop": ("learning_rate", "rho", "momentum", "epsilon", "centered"),
}


def optimizer_from_keras(optimizer):
    """``(class_name, keyword arguments)`` of the front's optimizer with the settings of a
    ``keras.optimizers`` object."""
    return optimizer_from_config(type(optimizer).__name__, optimizer.get_config())


def optimizer_from_config(class_name, config):
    """``(class_name, keyword arguments)`` of the front's optimizer (``rnnfast.keras.
    optimizers``) of a Keras optimizer's class name and ``get_config()``."""
    what = f"optimizer ({class_name})"
    if class_name not in _OWN:
        raise NotImplementedError(
            f"{what}: rnnfast has no {class_name}; use one of {sorted(_OWN)} (keras.optimizers or "
            "rnnfast.keras.optimizers), or an rnnfast.optim optimizer"
        )
    config = dict(config)
    lr = config.get("learning_rate")
    if isinstance(lr, dict) or not isinstance(lr, (int, float)):
        _refuse(
            what,
            "learning_rate",
            lr if not isinstance(lr, dict) else lr.get("class_name", lr),
            "a number",
            "change it during training with keras.callbacks.LearningRateScheduler or "
            "ReduceLROnPlateau instead of a schedule",
        )
    for key, inert in _OPTIMIZER_INERT.items():
        if key in config and config[key] != inert:
            _refuse(what, key, config[key], f"{key}={inert!r}")
    known = set(_OWN[class_name]) | set(_COMMON) | set(_OPTIMIZER_INERT) | set(_OPTIMIZER_IGNORED)
    unknown = sorted(set(config) - known)
    if unknown:
        _refuse(what, unknown[0], config[unknown[0]], f"the keys {sorted(known)}")
    kwargs = {k: config[k] for k in (*_OWN[class_name], *_COMMON) if k in config}
    if class_name == "AdamW" and kwargs.get("weight_decay") is None:
        kwargs["weight_decay"] = 0.0  # None means no decay; AdamW's own default is 0.004
    return class_name, kwargs


# ---- losses -------------------------------------------------------------------------------------

# Keras's loss classes and functions -> the front's loss names (see _compile)
_LOSS_CLASSES = {
    "MeanSquaredError": "mse",
    "MeanAbsoluteError": "mae",
    "MeanAbsolutePercentageError": "mape",
    "MeanSquaredLogarithmicError": "msle",
    "Huber": "huber",
    "LogCosh": "log_cosh",
    "SparseCategoricalCrossentropy": "sparse_categorical_crossentropy",
    "CategoricalCrossentropy": "categorical_crossentropy",
    "BinaryCrossentropy": "binary_crossentropy",
}
_LOSS_OPTIONS = {"from_logits": False, "label_smoothing": 0.0, "delta": 1.0}
_LOSS_INERT = {"reduction": "sum_over_batch_size", "axis": -1, "ignore_class": None}


def loss_from_keras(loss):
    """``(name, options)`` of a ``keras.losses`` object or function: the front's loss name and
    its options (``from_logits``, ``label_smoothing``, ``delta``)."""
    if not hasattr(loss, "get_config"):  # a function: keras.losses.mean_absolute_error
        return getattr(loss, "__name__", repr(loss)), {}
    class_name = type(loss).__name__
    what = f"loss ({class_name})"
    if class_name not in _LOSS_CLASSES:
        raise NotImplementedError(
            f"{what}: not supported; use one of {sorted(_LOSS_CLASSES)} (or their names)"
        )
    config = dict(loss.get_config())
    config.update(getattr(loss, "_fn_kwargs", {}) or {})  # Huber's delta lives there
    return loss_from_config(class_name, config)


def loss_from_config(class_name, config):
    """``(name, options)`` of a Keras loss's class name and config."""
    what = f"loss ({class_name})"
    options = {}
    for key, value in config.items():
        if key in ("name", "dtype"):
            continue
        if key in _LOSS_INERT:
            if value != _LOSS_INERT[key]:
                _refuse(what, key, value, f"{key}={_LOSS_INERT[key]!r}")
        elif key in _LOSS_OPTIONS:
            options[key] = value
        else:
            _refuse(what, key, value, f"the options {sorted(_LOSS_OPTIONS)}")
    return _LOSS_CLASSES[class_name], options


# ---- metrics ------------------------------------------------------------------------------------

_METRIC_CLASSES = {
    "Accuracy": "accuracy",
    "SparseCategoricalAccuracy": "sparse_categorical_accuracy",
    "CategoricalAccuracy": "categorical_accuracy",
    "BinaryAccuracy": "binary_accuracy",
    "MeanAbsoluteError": "mae",
    "MeanSquaredError": "mse",
}


def metric_from_keras(metric):
    """``(name, shown)`` of a ``keras.metrics`` object: the front's metric and the name the
    history shows (the metric's ``name``)."""
    if not hasattr(metric, "get_config"):  # a function: keras.metrics.mean_absolute_error
        name = getattr(metric, "__name__", repr(metric))
        return name, name
    config = metric.get_config()
    return metric_from_config(type(metric).__name__, config), config.get("name")


def metric_from_config(class_name, config):
    """The front's metric name of a Keras metric's class name and config (a saved model's)."""
    if class_name not in _METRIC_CLASSES:
        raise NotImplementedError(
            f"metrics ({class_name}): not supported; use one of {sorted(_METRIC_CLASSES)} (or "
            "their names)"
        )
    config = dict(config)
    threshold = config.pop("threshold", 0.5)
    if threshold != 0.5:
        _refuse(f"metrics ({class_name})", "threshold", threshold, "threshold=0.5")
    return _METRIC_CLASSES[class_name]
