"""What ``compile`` sets up: Keras's losses and metrics by name, as the loss and metric callables
``rnnfast.training`` takes, on rnnfast's losses.

A softmax Dense before a categorical cross-entropy (or a sigmoid Dense before a binary one) hands
the loss its logits: during fit and evaluate the Dense's activation is set aside
(:meth:`Objective.logits_output`), the loss is computed from the logits (stable where Keras's
clipped log of probabilities is not) and the metrics read the logits by their own threshold.
"""

from __future__ import annotations

import contextlib

import numpy as np

from .. import losses

__all__ = ["Objective", "loss_name"]

_LOSSES = {
    "mse": "mse",
    "mean_squared_error": "mse",
    "sparse_categorical_crossentropy": "sparse_categorical_crossentropy",
    "categorical_crossentropy": "categorical_crossentropy",
    "binary_crossentropy": "binary_crossentropy",
}
# the activation whose logits each cross-entropy reads
_FUSED = {
    "sparse_categorical_crossentropy": "softmax",
    "categorical_crossentropy": "softmax",
    "binary_crossentropy": "sigmoid",
}
# Keras's meaning of "accuracy" after each loss
_ACCURACY = {
    "mse": "accuracy",
    "sparse_categorical_crossentropy": "sparse_categorical_accuracy",
    "categorical_crossentropy": "categorical_accuracy",
    "binary_crossentropy": "binary_accuracy",
}
_METRICS = ("sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy")


def loss_name(loss):
    """Keras's loss by its name, or a ValueError / TypeError listing the names."""
    if isinstance(loss, str) and loss in _LOSSES:
        return _LOSSES[loss]
    expected = f"one of {sorted(_LOSSES)}"
    if isinstance(loss, str):
        raise ValueError(f"loss: expected {expected}, got {loss!r}")
    raise TypeError(
        f"loss: expected {expected} (a Keras loss function needs automatic differentiation; "
        "for a loss of your own with its gradient use rnnfast.training.fit), got "
        f"{type(loss).__name__}"
    )


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
    """``loss(output, targets, mask=None) -> (value, d_output)`` of a Keras loss, from the
    output's probabilities or (``logits``) its logits. Named after Keras's loss."""

    def __init__(self, name, logits):
        self.__name__ = name
        self.logits = logits

    def __call__(self, out, y, mask=None):
        name, logits = self.__name__, self.logits
        if name == "mse":
            return losses.mse_loss(out, _like(y, out), mask=mask)
        if name == "binary_crossentropy":
            return losses.binary_cross_entropy(out, _like(y, out), from_logits=logits, mask=mask)
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

    def __init__(self, shown, kind, logits):
        self.__name__ = shown
        self.kind = kind
        self.logits = logits

    def __call__(self, out, y, mask=None):
        out = np.asarray(out)
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


class Objective:
    """The compiled loss and metrics of a model whose last layer (of the front) is ``last``.

    Parameters
    ----------
    loss : str
        Keras's name.
    metrics : list of str
        "accuracy" / "acc" (Keras's accuracy for the loss) or one of
        "sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy".
    last : the model's last layer, or None
        A Dense whose activation matches a cross-entropy hands it the logits.
    """

    def __init__(self, loss, metrics, last):
        name = loss_name(loss)
        fused = _FUSED.get(name)
        self.dense = None
        if fused is not None and getattr(last, "activation", None) == fused:
            if hasattr(last, "units") and last.built:  # a Dense of the front
                self.dense = last.layer
        self.loss = _Loss(name, logits=self.dense is not None)
        self.metrics = [self._metric(m, name) for m in metrics]

    def _metric(self, metric, name):
        if metric in ("accuracy", "acc"):
            return _Metric(metric, _ACCURACY[name], self.loss.logits)
        if metric in _METRICS:
            return _Metric(metric, metric, self.loss.logits)
        expected = ["accuracy", "acc", *_METRICS]
        raise ValueError(f"metrics: expected names among {expected}, got {metric!r}")

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
