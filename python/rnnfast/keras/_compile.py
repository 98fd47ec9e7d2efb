"""What ``compile`` sets up: Keras's losses and metrics by name, as the loss and metric callables
``rnnfast.training`` takes, on rnnfast's losses.

A softmax Dense before a categorical cross-entropy (or a sigmoid Dense before a binary one) hands
the loss its logits: during fit and evaluate the Dense's activation is set aside
(:meth:`Objective.logits_output`), the loss is computed from the logits (stable where Keras's
clipped log of probabilities is not) and the metrics read the logits by their own threshold.

A loss is Keras's name, a ``keras.losses`` object or function (read by ``_keras_objects``:
``from_logits``, ``label_smoothing``, Huber's ``delta``); the regression losses beyond mse and
the per-position values that sample weights need are in ``_losses``.
"""

from __future__ import annotations

import contextlib

import numpy as np

from .. import losses
from ._keras_objects import is_keras_object, loss_from_config, loss_from_keras, metric_from_keras
from ._losses import REGRESSION, position_values, regression

__all__ = ["Objective", "check_compile_extras", "loss_name", "parse_loss"]

_LOSSES = {
    "mse": "mse",
    "mean_squared_error": "mse",
    "sparse_categorical_crossentropy": "sparse_categorical_crossentropy",
    "categorical_crossentropy": "categorical_crossentropy",
    "binary_crossentropy": "binary_crossentropy",
    "mae": "mae",
    "mean_absolute_error": "mae",
    "mape": "mape",
    "mean_absolute_percentage_error": "mape",
    "msle": "msle",
    "mean_squared_logarithmic_error": "msle",
    "huber": "huber",
    "huber_loss": "huber",
    "log_cosh": "log_cosh",
    "logcosh": "log_cosh",
}
# the activation whose logits each cross-entropy reads
_FUSED = {
    "sparse_categorical_crossentropy": "softmax",
    "categorical_crossentropy": "softmax",
    "binary_crossentropy": "sigmoid",
}
# Keras's meaning of "accuracy" after each loss
_ACCURACY = {name: "accuracy" for name in REGRESSION}
_ACCURACY |= {
    "sparse_categorical_crossentropy": "sparse_categorical_accuracy",
    "categorical_crossentropy": "categorical_accuracy",
    "binary_crossentropy": "binary_accuracy",
}
_METRICS = ("sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy")
# regression metrics: Keras's names -> the element-wise error they average
_ERRORS = {
    "mae": "mae",
    "mean_absolute_error": "mae",
    "mse": "mse",
    "mean_squared_error": "mse",
}


def parse_loss(loss):
    """``(name, options)`` of ``compile(loss=...)``: Keras's name or a ``keras.losses``
    object or function; a ValueError / TypeError listing the names otherwise."""
    options = {}
    if is_keras_object(loss):
        loss, options = loss_from_keras(loss)
    elif isinstance(loss, dict) and "class_name" in loss:  # Keras's serialized loss (a file's)
        loss, options = loss_from_config(loss["class_name"], loss.get("config", {}))
    if isinstance(loss, str) and loss in _LOSSES:
        return _LOSSES[loss], options
    expected = f"one of {sorted(_LOSSES)} or a keras.losses object of them"
    if isinstance(loss, str):
        raise ValueError(f"loss: expected {expected}, got {loss!r}")
    raise TypeError(
        f"loss: expected {expected} (a loss function of your own needs automatic "
        "differentiation; for a loss with its gradient use rnnfast.training.fit), got "
        f"{type(loss).__name__}"
    )


def check_compile_extras(
    *,
    loss_weights,
    weighted_metrics,
    run_eagerly,
    steps_per_execution,
    jit_compile,
    auto_scale_loss,
):
    """Keras's compile keywords beyond optimizer, loss and metrics: those that only change how
    Keras runs (eager or compiled graphs, steps per call, loss scaling for float16) change
    nothing here and are accepted; those that change the result are refused unless unset."""
    if loss_weights is not None:
        raise NotImplementedError(
            "loss_weights: the front trains one output with one loss; leave it None (scale the "
            "loss with sample_weight in fit)"
        )
    if weighted_metrics:
        raise NotImplementedError(
            "weighted_metrics: not supported; the front's metrics are unweighted (as Keras's "
            "metrics=); leave it None"
        )
    for name, value in (("run_eagerly", run_eagerly), ("auto_scale_loss", auto_scale_loss)):
        if not isinstance(value, bool):
            raise TypeError(f"{name}: expected a bool, got {type(value).__name__}")
    if jit_compile not in ("auto", True, False):
        raise ValueError(f"jit_compile: expected 'auto', True or False, got {jit_compile!r}")
    if steps_per_execution != "auto" and (
        not isinstance(steps_per_execution, int) or steps_per_execution < 1
    ):
        raise ValueError(
            f"steps_per_execution: expected an int >= 1 or 'auto', got {steps_per_execution!r}"
        )


def loss_name(loss):
    """The front's name of Keras's loss (see :func:`parse_loss`)."""
    return parse_loss(loss)[0]


def _like(y, out):
    """Targets with the output's rank, as Keras squeezes or expands a trailing axis of 1."""
    y = np.asarray(y)
    if y.ndim == out.ndim - 1 and out.shape[-1] == 1:
        return y[..., None]
    if y.ndim == out.ndim + 1 and y.shape[-1] == 1:
        return y[..., 0]
    return y


def _class_ids(y, out):
    """Sparse targets as int64 class ids of the output's leading shape (a trailing axis of 1
    dropped, integral floats accepted, as Keras casts them)."""
    y = np.asarray(y)
    if y.ndim == out.ndim and y.ndim and y.shape[-1] == 1:
        y = y[..., 0]
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
            raise ValueError("y: sparse categorical targets must be class ids (integers)")
    elif y.dtype.kind not in "iub":
        raise TypeError(f"y: expected class ids, got dtype {y.dtype}")
    y = y.astype(np.int64)
    classes = out.shape[-1]
    if y.size and (y.min() < 0 or y.max() >= classes):
        raise ValueError(
            f"y: expected class ids in [0, {classes}), got min {y.min()}, max {y.max()}"
        )
    return y


class _Loss:
    """``loss(output, targets, mask=None, weights=None) -> (value, d_output)`` of a Keras
    loss, from the output's probabilities or (``logits``) its logits, with Keras's
    ``label_smoothing`` and Huber's ``delta``; ``weights`` are the sample weights of the
    positions. Named after Keras's loss."""

    def __init__(self, name, logits, label_smoothing=0.0, delta=1.0):
        self.__name__ = name
        self.logits = logits
        self.label_smoothing = float(label_smoothing)
        self.delta = float(delta)

    def __call__(self, out, y, mask=None, weights=None):
        if weights is not None and mask is not None:
            raise NotImplementedError(
                "sample_weight: not supported with padded sequences (an Embedding's mask_zero "
                "before per-step outputs); leave out sample_weight or the padding"
            )
        name = self.__name__
        if name in REGRESSION and (name != "mse" or weights is not None):
            return regression(
                name, out, _like(y, out), mask=mask, weights=weights, delta=self.delta
            )
        value, grad = self._unweighted(name, out, y, mask)
        if weights is None:
            return value, grad
        # each position's gradient depends on its own loss only: scale it by the weight
        target = self._targets(name, out, y)
        each = position_values(name, out, target, logits=self.logits, delta=self.delta)
        w = np.asarray(weights, dtype=np.float64).reshape(each.shape)
        value = float(np.sum(w * each)) / max(each.size, 1)
        scale = w.reshape(w.shape + (1,) * (np.ndim(out) - w.ndim)).astype(out.dtype)
        return value, grad * scale

    def _targets(self, name, out, y):
        """The targets in the output's shape, smoothed as Keras's ``label_smoothing``."""
        if name == "sparse_categorical_crossentropy":
            return np.eye(out.shape[-1], dtype=out.dtype)[_class_ids(y, out)]
        y = _like(y, out) if name != "categorical_crossentropy" else np.asarray(y)
        if self.label_smoothing:
            ls = self.label_smoothing
            spread = 0.5 if name == "binary_crossentropy" else 1.0 / out.shape[-1]
            y = np.asarray(y, dtype=out.dtype) * (1.0 - ls) + ls * spread
        return y

    def _unweighted(self, name, out, y, mask):
        logits = self.logits
        if name == "mse":
            return losses.mse_loss(out, _like(y, out), mask=mask)
        y = self._targets(name, out, y) if name != "sparse_categorical_crossentropy" else y
        if name == "binary_crossentropy":
            return losses.binary_cross_entropy(out, y, from_logits=logits, mask=mask)
        if name == "categorical_crossentropy":
            return losses.categorical_cross_entropy(out, y, from_logits=logits, mask=mask)
        ids = _class_ids(y, out)
        if logits:
            return losses.cross_entropy(out, ids, mask=mask)
        one_hot = np.eye(out.shape[-1], dtype=out.dtype)[ids]
        return losses.categorical_cross_entropy(out, one_hot, mask=mask)


class _Metric:
    """``metric(output, targets, mask=None) -> float``: the mean of a Keras accuracy over the
    counted positions; ``__name__`` is the name the history shows."""

    def __init__(self, shown, kind, logits, activation=None):
        self.__name__ = shown
        self.kind = kind
        self.logits = logits
        self.activation = activation  # the fused Dense's, set aside during fit

    def __call__(self, out, y, mask=None):
        out = np.asarray(out)
        if self.kind in ("mae", "mse"):
            return self._error(out, y, mask)
        if self.kind == "sparse_categorical_accuracy":
            hits = np.argmax(out, axis=-1) == _class_ids(y, out)
        elif self.kind == "categorical_accuracy":
            hits = np.argmax(out, axis=-1) == np.argmax(np.asarray(y), axis=-1)
        elif self.kind == "binary_accuracy":
            # Keras's threshold 0.5 on the probabilities is 0 on the logits
            predicted = out > (0.0 if self.logits else 0.5)
            hits = predicted.astype(out.dtype) == _like(y, out)
        else:  # "accuracy" after mse: Keras's Accuracy, exact equality
            hits = out == _like(y, out)
        if mask is None:
            return float(np.mean(hits)) if hits.size else 0.0
        keep = np.broadcast_to(
            mask.reshape(mask.shape + (1,) * (hits.ndim - mask.ndim)), hits.shape
        )
        return float(np.mean(hits[keep])) if keep.any() else 0.0

    def _error(self, out, y, mask):
        """Keras's MeanAbsoluteError / MeanSquaredError of the outputs (the probabilities
        again where the loss reads logits)."""
        if self.logits and self.activation == "sigmoid":
            out = 1.0 / (1.0 + np.exp(-out))
        elif self.logits and self.activation == "softmax":
            e = np.exp(out - out.max(axis=-1, keepdims=True))
            out = e / e.sum(axis=-1, keepdims=True)
        d = out.astype(np.float64) - np.asarray(_like(y, out), dtype=np.float64)
        each = np.abs(d) if self.kind == "mae" else d * d
        if mask is not None:
            keep = np.broadcast_to(
                mask.reshape(mask.shape + (1,) * (each.ndim - mask.ndim)), each.shape
            )
            return float(np.mean(each[keep])) if keep.any() else 0.0
        return float(np.mean(each)) if each.size else 0.0


class Objective:
    """The compiled loss and metrics of a model whose last layer (of the front) is ``last``.

    Parameters
    ----------
    loss : str, or a keras.losses object or function
        Keras's name (see :func:`parse_loss`).
    metrics : list of str or keras.metrics objects
        "accuracy" / "acc" (Keras's accuracy for the loss), one of
        "sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy", "mae" /
        "mean_absolute_error", "mse" / "mean_squared_error", or a keras.metrics object of
        them.
    last : the model's last layer, or None
        A Dense whose activation matches a cross-entropy hands it the logits.
    """

    def __init__(self, loss, metrics, last):
        name, options = parse_loss(loss)
        from_logits = bool(options.get("from_logits", False))
        fused = None if from_logits else _FUSED.get(name)
        self.dense = None
        if fused is not None and getattr(last, "activation", None) == fused:
            if hasattr(last, "units") and last.built:  # a Dense of the front
                self.dense = last.layer
        if options.get("label_smoothing") and name == "sparse_categorical_crossentropy":
            raise ValueError("loss: label_smoothing needs one-hot targets (categorical)")
        self.loss = _Loss(
            name,
            logits=self.dense is not None or from_logits,
            label_smoothing=options.get("label_smoothing", 0.0),
            delta=options.get("delta", 1.0),
        )
        self.activation = fused if self.dense is not None else None
        self.metrics = [self._metric(m, name) for m in metrics]

    def _metric(self, metric, name):
        shown = metric
        if is_keras_object(metric):
            metric, shown = metric_from_keras(metric)
        logits = self.loss.logits
        if metric in ("accuracy", "acc"):
            return _Metric(shown, _ACCURACY[name], logits)
        if metric in _METRICS:
            return _Metric(shown, metric, logits)
        if metric in _ERRORS:
            return _Metric(shown, _ERRORS[metric], logits, self.activation)
        expected = ["accuracy", "acc", *_METRICS, *_ERRORS]
        if isinstance(metric, str):
            raise ValueError(f"metrics: expected names among {expected}, got {metric!r}")
        raise TypeError(
            f"metrics: expected names among {expected} or keras.metrics objects of them, got "
            f"{type(metric).__name__}"
        )

    @contextlib.contextmanager
    def logits_output(self):
        """While inside: the fused Dense outputs its logits (nothing changes without one)."""
        if self.dense is None:
            yield
            return
        saved = self.dense.activation
        self.dense.activation = None
        try:
            yield
        finally:
            self.dense.activation = saved

    def callbacks(self, callbacks):
        """The callbacks, each run with the Dense's activation back in place (a checkpoint
        saves the model as it was compiled)."""
        if self.dense is None:
            return list(callbacks)
        return [_Restored(cb, self.dense, self.dense.activation) for cb in callbacks]


class _Restored:
    """A training callback run with a Dense's activation restored while it runs."""

    def __init__(self, callback, dense, activation):
        self.callback = callback
        self.dense = dense
        self._activation = activation

    def on_epoch_end(self, epoch, logs, model):
        logits = self.dense.activation
        self.dense.activation = self._activation
        try:
            return self.callback.on_epoch_end(epoch, logs, model)
        finally:
            self.dense.activation = logits
