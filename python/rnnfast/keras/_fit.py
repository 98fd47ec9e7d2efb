"""The front's ``fit`` and ``evaluate`` with Keras's arguments: arrays or a Python generator
(``steps_per_epoch``, ``validation_steps``), ``sample_weight`` (and ``(x, y, sample_weight)``
validation data or generator batches), Keras's callbacks beside rnnfast's, on the loops of
``_fit_loop``. Arguments of Keras's fit that the front cannot honour raise, naming the
argument and the fix.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import math
import warnings

import numpy as np

from .. import training
from .._validation import check_positive_int, check_real_in
from ..training._loop import FitOptions
from ._fit_loop import ArrayLoop, GeneratorLoop
from ._sample_weight import check_weights, pack
from .callbacks import KerasHooks, split_callbacks

__all__ = ["evaluate", "fit", "is_generator"]


def is_generator(x):
    """Whether ``x`` is an iterator of batches (a generator), not data."""
    return inspect.isgenerator(x) or (hasattr(x, "__next__") and hasattr(x, "__iter__"))


def _refuse_unknown_data(x, what="x"):
    if is_generator(x) or isinstance(x, (np.ndarray, list, tuple)) or np.isscalar(x):
        return
    if hasattr(x, "__array__") or hasattr(x, "shape"):
        return  # array-likes: torch tensors, ...
    if hasattr(x, "__iter__") or hasattr(x, "__getitem__"):
        raise TypeError(
            f"{what}: expected arrays or a Python generator of (x, y) batches, got "
            f"{type(x).__name__} (a tf.data.Dataset, DataLoader or PyDataset is not read); "
            "wrap it: ((xb, yb) for xb, yb in data) with steps_per_epoch="
        )


def _refuse(name, value, default, fix):
    if value is not default and value != default:
        raise NotImplementedError(f"{name}={value!r}: not supported by rnnfast.keras; {fix}")


def _refuse_array_validation_steps(validation_steps):
    """Both loops: with validation arrays (not a generator) there are no steps to set."""
    _refuse(
        "validation_steps",
        validation_steps,
        None,
        "with arrays validation runs over all of validation_data",
    )


@contextlib.contextmanager
def _as_compiled(objective, model):
    """While a Keras callback runs: the fused Dense's activation back (the model as compiled)
    and the training mode kept (a callback that predicts must not leave dropout off)."""
    dense = objective.dense
    mode = getattr(model, "training", None)
    saved = None if dense is None else dense.activation
    if dense is not None:
        dense.activation = objective.activation
    try:
        yield
    finally:
        if dense is not None:
            dense.activation = saved
        if mode is not None:
            model.train(mode)


def _weighted_objective(objective, packed):
    loss = objective.loss if packed is None else packed.loss(objective.loss)
    metrics = objective.metrics if packed is None else [packed.metric(m) for m in objective.metrics]
    return loss, metrics


def _batch_preparer(front, first, weighted, packed_ref, what):
    """``prepare((x, y[, sample_weight])) -> (x, y)`` of generator batches."""

    def prepare(batch):
        if not isinstance(batch, (tuple, list)) or len(batch) not in (2, 3):
            raise ValueError(
                f"{what}: a generator must yield (x, y) or (x, y, sample_weight), got "
                f"{type(batch).__name__}"
                + (f" of {len(batch)}" if isinstance(batch, (tuple, list)) else "")
            )
        xb, yb = front._data(batch[0], batch[1])
        if not weighted:
            if len(batch) == 3:
                raise ValueError(
                    f"{what}: a batch has sample weights, the first training batch had none; "
                    "give every batch the same form"
                )
            return xb, yb
        w = batch[2] if len(batch) == 3 else np.ones(len(yb))
        packed_y, packed = pack(yb, w)
        if packed_ref and (packed.shape, packed.dtype) != (
            packed_ref[0].shape,
            packed_ref[0].dtype,
        ):
            raise ValueError(f"{what}: the batches' targets differ in shape or dtype")
        packed_ref[:] = packed_ref or [packed]
        return xb, packed_y

    return prepare


def fit(
    front,
    x,
    y,
    *,
    batch_size,
    epochs,
    verbose,
    callbacks,
    validation_split,
    validation_data,
    shuffle,
    sample_weight,
    class_weight,
    initial_epoch,
    steps_per_epoch,
    validation_steps,
    validation_batch_size,
    validation_freq,
):
    """Keras's fit on the front model ``front`` (see ``Sequential.fit``)."""
    _refuse("class_weight", class_weight, None, "weight the samples with sample_weight instead")
    _refuse(
        "initial_epoch",
        initial_epoch,
        0,
        "fit for the remaining epochs (epochs=epochs - initial_epoch)",
    )
    _refuse("validation_freq", validation_freq, 1, "validate every epoch")
    _refuse(
        "validation_batch_size",
        validation_batch_size,
        None,
        "leave it out: validation runs in batches of batch_size",
    )
    epochs = check_positive_int("epochs", epochs)
    keras_callbacks, ours = split_callbacks(callbacks)
    front._objective("fit")
    _refuse_unknown_data(x)
    if is_generator(x):
        loop_for = _generator_loop
    else:
        loop_for = _array_loop
    batch_size = 32 if batch_size is None else batch_size
    model, objective, loop, steps = loop_for(
        front,
        x,
        y,
        batch_size=batch_size,
        epochs=epochs,
        verbose=verbose,
        validation_split=validation_split,
        validation_data=validation_data,
        shuffle=shuffle,
        sample_weight=sample_weight,
        steps_per_epoch=steps_per_epoch,
        validation_steps=validation_steps,
        callbacks=ours,
    )
    front.stop_training = False
    params = {"verbose": verbose, "epochs": epochs, "steps": steps}
    loop.hooks = KerasHooks(keras_callbacks, front, params, lambda: _as_compiled(objective, model))
    with objective.logits_output():
        loop.hooks.train_begin()
        history = loop.run()
        last = {k: v[-1] for k, v in history.items() if v}
        loop.hooks.train_end(last)
    return history, params


def _options(front, objective, packed, callbacks, **kwargs):
    """The loop's FitOptions, for the array loop and the generator loop alike: the loss and
    metrics weighted when the targets are ``packed`` with sample weights."""
    loss, metrics = _weighted_objective(objective, packed)
    return FitOptions(
        loss=loss,
        optimizer=front._built_optimizer(),
        metrics=metrics,
        callbacks=objective.callbacks(callbacks),
        batch_axis=0,
        **kwargs,
    )


def _validation(front, validation_data, weighted):
    """``(x_val, y_val)`` (``y_val`` packed with its weights when ``weighted``) and whether
    the validation data brings weights."""
    if validation_data is None:
        return None
    if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
        raise ValueError(
            "validation_data: expected (x_val, y_val) or (x_val, y_val, sample_weight_val), got "
            f"{type(validation_data).__name__}"
            + (f" of {len(validation_data)}" if isinstance(validation_data, (tuple, list)) else "")
        )
    x_val, y_val = front._data(validation_data[0], validation_data[1])
    if weighted:
        w = validation_data[2] if len(validation_data) == 3 else np.ones(len(y_val))
        y_val, _ = pack(y_val, w)
    return x_val, y_val


def _array_loop(
    front,
    x,
    y,
    *,
    batch_size,
    epochs,
    verbose,
    validation_split,
    validation_data,
    shuffle,
    sample_weight,
    steps_per_epoch,
    validation_steps,
    callbacks,
):
    _refuse(
        "steps_per_epoch",
        steps_per_epoch,
        None,
        "with arrays an epoch is every batch of batch_size; give a generator to set steps",
    )
    _refuse_array_validation_steps(validation_steps)
    x, y = front._data(x, y)
    if sample_weight is not None:
        sample_weight = check_weights(sample_weight, len(x))
    split = check_real_in("validation_split", validation_split, 0, 1, high_open=True)
    if split and validation_data is None:
        n = len(x)
        at = int(math.floor(n * (1.0 - split)))
        if at in (0, n):
            raise ValueError(
                f"validation_split: {split} of {n} samples leaves no training or no "
                "validation samples"
            )
        validation_data = (x[at:], y[at:])
        if sample_weight is not None:
            validation_data += (sample_weight[at:],)
            sample_weight = sample_weight[:at]
        x, y = x[:at], y[:at]
    weighted = sample_weight is not None or (
        isinstance(validation_data, (tuple, list)) and len(validation_data) == 3
    )
    validation = _validation(front, validation_data, weighted)
    model = front._build_for(x)
    objective = front._objective("fit")  # now that the last layer is built
    packed = None
    if weighted:
        y, packed = pack(y, np.ones(len(y)) if sample_weight is None else sample_weight)
    options = _options(
        front,
        objective,
        packed,
        callbacks,
        epochs=epochs,
        batch_size=batch_size,
        shuffle=shuffle,
        validation_data=validation,
        verbose=verbose,
    )
    steps = -(-len(x) // check_positive_int("batch_size", batch_size))
    return model, objective, ArrayLoop(model, x, y, options), steps


def _generator_loop(
    front,
    x,
    y,
    *,
    batch_size,
    epochs,
    verbose,
    validation_split,
    validation_data,
    shuffle,
    sample_weight,
    steps_per_epoch,
    validation_steps,
    callbacks,
):
    for name, value in (("y", y), ("sample_weight", sample_weight)):
        if value is not None:
            raise ValueError(
                f"{name}: with a generator as x, give no {name} (the generator yields (x, y) or "
                "(x, y, sample_weight)), as Keras"
            )
    if shuffle:  # as Keras: said, not silently dropped
        warnings.warn(
            "shuffle=True was passed, but will be ignored since the data x was provided as a "
            "generator; the generator is expected to yield already-shuffled data (pass "
            "shuffle=False)",
            UserWarning,
            stacklevel=4,
        )
    _refuse(
        "validation_split",
        validation_split,
        0.0,
        "a generator cannot be split; give validation_data",
    )
    if steps_per_epoch is None:
        raise ValueError(
            "steps_per_epoch: required with a generator as x (the number of batches in an "
            "epoch); a Python generator has no length"
        )
    steps = check_positive_int("steps_per_epoch", steps_per_epoch)
    try:
        first = next(x)
    except StopIteration:
        raise ValueError("x: the generator yields no batches") from None
    if not isinstance(first, (tuple, list)) or len(first) not in (2, 3):
        raise ValueError(
            f"x: a generator must yield (x, y) or (x, y, sample_weight), got {type(first).__name__}"
        )
    val_is_generator = is_generator(validation_data)
    weighted = len(first) == 3 or (
        not val_is_generator
        and isinstance(validation_data, (tuple, list))
        and len(validation_data) == 3
    )
    packed_ref = []
    prepare = _batch_preparer(front, first, weighted, packed_ref, "x")
    first_x, first_y = prepare(first)  # builds the model from the first batch's shape
    model = front._build_for(first_x)
    objective = front._objective("fit")
    source = itertools.chain([(first_x, first_y)], map(prepare, x))
    if val_is_generator:
        if validation_steps is None:
            raise ValueError(
                "validation_steps: required with a generator as validation_data (the batches "
                "to draw each epoch)"
            )
        check_positive_int("validation_steps", validation_steps)
        validation = validation_data
    else:
        _refuse_array_validation_steps(validation_steps)
        validation = _validation(front, validation_data, weighted)
    options = _options(
        front,
        objective,
        packed_ref[0] if packed_ref else None,
        callbacks,
        epochs=epochs,
        batch_size=batch_size,
        shuffle=shuffle,
        validation_data=validation,
        verbose=verbose,
    )
    loop = GeneratorLoop(
        model,
        _Prepared(source),
        steps,
        options,
        lambda b: b,
        validation_steps,
        _batch_preparer(front, first, weighted, packed_ref, "validation_data"),
    )
    return model, objective, loop, steps


class _Prepared:
    """An iterator of batches already prepared (the training generator's)."""

    def __init__(self, source):
        self.source = source

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.source)


def evaluate(front, x, y, *, batch_size, sample_weight, steps, callbacks):
    """Keras's evaluate on arrays (see ``Sequential.evaluate``): ``{"loss": ..., ...}``."""
    _refuse("steps", steps, None, "evaluate runs over all of x (arrays)")
    _refuse("callbacks", callbacks, None, "the front's evaluate calls no callbacks")
    _refuse_unknown_data(x)
    if is_generator(x):
        raise NotImplementedError(
            "x: evaluate takes arrays; for a generator, gather its batches with np.concatenate"
        )
    front._objective("evaluate")
    x, y = front._data(x, y)
    model = front._build_for(x)
    objective = front._objective("evaluate")
    packed = None
    if sample_weight is not None:
        y, packed = pack(y, sample_weight)
    loss, metrics = _weighted_objective(objective, packed)
    with objective.logits_output():
        return training.evaluate(
            model,
            x,
            y,
            loss=loss,
            metrics=metrics,
            batch_size=32 if batch_size is None else batch_size,
            batch_axis=0,
        ), objective
