"""Keras's callbacks (``keras.callbacks.EarlyStopping``, ``ModelCheckpoint``,
``ReduceLROnPlateau``, ``CSVLogger``, ``LambdaCallback``, ``LearningRateScheduler``,
``TerminateOnNaN``, a ``keras.callbacks.Callback`` of your own) passed to the front's ``fit``.

They run as they are: Keras's own code, called at Keras's points (train, epoch and batch
begin and end; test begin and end around the validation), on the front model, which presents
what they use of ``keras.Model``: ``stop_training``, ``get_weights`` / ``set_weights``,
``save`` / ``save_weights`` (the ``.keras`` and ``.weights.h5`` formats), ``optimizer.
learning_rate`` (read and set) and ``metrics``-free direction finding (``mode="auto"`` is
resolved here from the monitored name, as Keras resolves it from the compiled metrics).

Refused, naming the callback and the fix: ``TensorBoard`` and ``BackupAndRestore`` (they read
Keras's internals; ``rnnfast.training.fit(backup_dir=...)`` resumes a killed run), a
callback with test-batch or predict hooks (the front's validation and predict call none).
"""

from __future__ import annotations

import sys

__all__ = ["KerasHooks", "is_keras_callback", "split_callbacks"]

_REFUSED = {
    "TensorBoard": "it writes Keras's graphs and summaries; log the History instead",
    "BackupAndRestore": "use rnnfast.training.fit(..., backup_dir=...) for a run that resumes",
    "SwapEMAWeights": "the front's optimizers keep no moving average of the weights",
}
_UNCALLED = (
    "on_test_batch_begin",
    "on_test_batch_end",
    "on_predict_begin",
    "on_predict_end",
    "on_predict_batch_begin",
    "on_predict_batch_end",
)
# the monitored figures that are better when larger (Keras reads the direction off the metric)
_UP = ("accuracy", "acc")


def is_keras_callback(callback):
    """Whether ``callback`` is a ``keras.callbacks.Callback`` (keras already imported when one
    exists, so it is not imported here)."""
    keras = sys.modules.get("keras")
    return keras is not None and isinstance(callback, keras.callbacks.Callback)


def split_callbacks(callbacks):
    """``(keras_callbacks, rnnfast_callbacks)`` of fit's ``callbacks``, each checked."""
    if callbacks is None:
        return [], []
    if not isinstance(callbacks, (list, tuple)):
        raise TypeError(f"callbacks: expected a list of callbacks, got {type(callbacks).__name__}")
    ours, theirs = [], []
    for i, cb in enumerate(callbacks):
        if is_keras_callback(cb):
            _check_keras(cb, i)
            theirs.append(cb)
        elif callable(getattr(cb, "on_epoch_end", None)):
            ours.append(cb)
        else:
            raise TypeError(
                f"callbacks[{i}]: expected a keras.callbacks.Callback or an rnnfast.training "
                f"callback (on_epoch_end(epoch, logs, model)), got {type(cb).__name__}"
            )
    return theirs, ours


def _check_keras(cb, i):
    name = type(cb).__name__
    if name in _REFUSED:
        raise NotImplementedError(f"callbacks[{i}]: {name} is not supported; {_REFUSED[name]}")
    import keras

    base = keras.callbacks.Callback
    for hook in _UNCALLED:
        # a subclass's method, or a LambdaCallback's function set on the instance
        if hook in vars(cb) or getattr(type(cb), hook) is not getattr(base, hook):
            raise NotImplementedError(
                f"callbacks[{i}]: {name} defines {hook}, which the front never calls (its "
                "evaluate and predict take no callbacks, and validation calls only "
                "on_test_begin / on_test_end); move that work to an epoch or train hook"
            )


def _resolve_auto(cb):
    """``mode="auto"``: Keras finds the direction on the compiled metric of the monitored
    name, which the front does not hold as Keras objects; the same choice, from the name."""
    if getattr(cb, "mode", None) != "auto" or getattr(cb, "monitor_op", "") is not None:
        return
    name = cb.monitor.removeprefix("val_")
    if name == "loss":
        return  # Keras resolves the loss itself
    from keras import ops

    cb.monitor_op = ops.greater if name in _UP or name.endswith("accuracy") else ops.less
    if cb.monitor_op is ops.less:
        cb.min_delta *= -1  # as Keras's _set_monitor_op


class KerasHooks:
    """Keras's callbacks on the front model ``front``: the loop calls these at Keras's points;
    each runs with the model as compiled (``restored``: the fused Dense's activation back).
    ``stop_training`` is the model's flag, which a callback sets."""

    def __init__(self, callbacks, front, params, restored):
        self.callbacks, self.front, self.restored = list(callbacks), front, restored
        for cb in self.callbacks:
            cb.set_model(front)
            cb.set_params(dict(params))
            _resolve_auto(cb)

    @property
    def stop_training(self):
        return bool(self.front.stop_training)

    def _call(self, hook, *args):
        if not self.callbacks:
            return
        with self.restored():
            for cb in self.callbacks:
                getattr(cb, hook)(*args)

    def train_begin(self):
        self._call("on_train_begin", {})

    def train_end(self, logs):
        self._call("on_train_end", dict(logs))

    def epoch_begin(self, epoch):
        self._call("on_epoch_begin", epoch, {})

    def batch_begin(self, batch):
        self._call("on_train_batch_begin", batch, {})

    def batch_end(self, batch, logs):
        self._call("on_train_batch_end", batch, dict(logs))

    def test_begin(self):
        self._call("on_test_begin", {})

    def test_end(self, logs):
        self._call("on_test_end", dict(logs or {}))

    def epoch_end(self, epoch, logs):
        """Run the callbacks' epoch end on a copy of the logs; the figures they added (as
        ReduceLROnPlateau's ``learning_rate``), which Keras's History records too."""
        seen = dict(logs)
        self._call("on_epoch_end", epoch, seen)
        return {k: v for k, v in seen.items() if k not in logs}
