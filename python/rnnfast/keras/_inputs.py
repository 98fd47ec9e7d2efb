"""The data a model of the front is given, as Keras takes it: float (and integer) arrays cast to
the model's dtype (float32 by default: float64 data works, as in Keras), integer ids left as
they are for an Embedding, the user's arrays never modified; a sample without its batch axis
refused with Keras's reason and the fix."""

from __future__ import annotations

import numpy as np

__all__ = ["model_input", "model_targets"]


def model_input(x, first_layer, input_shape, name="x"):
    """``x`` as the model computes with it: cast to the first layer's dtype (unless it reads
    ids), its number of dimensions checked against the model's ``input_shape`` (with the batch
    axis; None when not known yet)."""
    x = np.asarray(getattr(x, "value", x))
    if x.dtype.kind not in "fiub":
        raise TypeError(f"{name}: expected numbers, got an array of dtype {x.dtype}")
    if input_shape is not None and x.ndim != len(input_shape):
        fix = ""
        if x.ndim == len(input_shape) - 1:
            fix = f"; for one sample, add the batch axis: {name}[None] (shape {(1, *x.shape)})"
        raise ValueError(
            f"{name}: expected an array of {len(input_shape)} dimensions, shape "
            f"{tuple(input_shape)} (the first is the batch), got shape {x.shape}{fix}"
        )
    if getattr(first_layer, "reads_ids", False):
        # Keras's Embedding casts float ids to ints (truncating), as astype does
        return x.astype(np.int64) if x.dtype.kind == "f" else x
    return x.astype(first_layer.dtype, copy=False)  # astype: a new array, never the user's


def model_targets(y, dtype):
    """Float targets in the model's dtype (Keras casts them to the outputs'); integer targets
    (class ids, 0/1 labels) as they are: the losses read both."""
    y = np.asarray(getattr(y, "value", y))
    if y.dtype.kind == "f":
        return y.astype(dtype, copy=False)
    return y
