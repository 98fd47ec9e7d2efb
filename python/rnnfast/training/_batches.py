"""The data side of the training loops: a data set in the model's layout, the batches of an
epoch, a model's output on a batch with the valid mask of that output, and the layers whose
state is reset at each epoch's start."""

from __future__ import annotations

import numpy as np

from ..data.batching import BucketedBatches
from ..data.dataset import SequenceData
from ..nn.masking import valid_from_lengths

__all__ = [
    "check_bucketing",
    "epoch_order",
    "eval_batches",
    "eval_order",
    "forward",
    "layout",
    "model_data",
    "reset_stateful",
    "stateful_layers",
    "stream_windows",
    "window_losses",
]


def stateful_layers(model):
    layers = getattr(model, "layers", None)
    if layers is None and hasattr(model, "children"):
        layers = model.children()
    return [layer for layer in (layers or [model]) if getattr(layer, "stateful", False)]


def reset_stateful(model):
    """Forget the state that stateful layers carry (each epoch starts a new stream)."""
    for layer in stateful_layers(model):
        layer.reset_state()


def layout(model):
    """The model's ``batch_first`` (its RNNs'), or None when it does not say."""
    value = getattr(model, "batch_first", None)
    return value if isinstance(value, bool) else None


def model_data(model, x, y, lengths, mask, batch_axis, what="x"):
    """The data set in the model's layout; a batch_axis that contradicts the model's RNNs is
    refused (a time-major RNN fed batch-first data would be silently wrong)."""
    batch_first = layout(model)
    if (
        batch_axis is not None
        and batch_first is not None
        and batch_axis in (0, 1)
        and batch_axis != (0 if batch_first else 1)
        and not isinstance(x, (list, tuple))
    ):
        raise ValueError(
            f"batch_axis: the model's RNNs are {'batch-first' if batch_first else 'time-major'}, "
            f"so {what}'s batch axis is {0 if batch_first else 1}, got batch_axis={batch_axis}; "
            "leave batch_axis out (fit follows the model's batch_first)"
        )
    return SequenceData(
        x,
        y,
        lengths=lengths,
        mask=mask,
        batch_first=True if batch_first is None else batch_first,
        batch_axis=batch_axis,
    )


def check_bucketing(data, bucket, max_tokens):
    """Batches by length (``bucket``, ``max_tokens``) need the data's lengths."""
    if (bucket or max_tokens is not None) and data.lengths is None:
        raise ValueError(
            "bucket: batches by length need variable-length data (ragged "
            "sequences, or lengths= / mask=)"
        )


def epoch_order(data, batch_size, shuffle, rng, bucket, max_tokens, drop_last):
    """The index arrays of one epoch: in order or shuffled, or bucketed by length."""
    if bucket or max_tokens is not None:
        check_bucketing(data, bucket, max_tokens)
        return list(
            BucketedBatches(
                data.lengths,
                batch_size,
                max_tokens=max_tokens,
                shuffle=shuffle,
                seed=int(rng.integers(2**31)),
                drop_last=drop_last,
            )
        )
    order = rng.permutation(len(data)) if shuffle else np.arange(len(data))
    stop = len(data) - (len(data) % batch_size if drop_last else 0)
    return [order[i : i + batch_size] for i in range(0, stop, batch_size)]


_UNKNOWN = object()


def forward(model, xb, lengths):
    """The model's output on a batch and the valid mask of that output (None when it has no
    padding: fixed-length data, or a last output)."""
    out = model(xb) if lengths is None else model(xb, lengths=lengths)
    out = out[0] if isinstance(out, tuple) else out
    if lengths is None:
        return out, getattr(model, "output_mask", None)
    valid = getattr(model, "output_mask", _UNKNOWN)
    if valid is _UNKNOWN:  # a model of the user's without the padding protocol
        valid = _batch_valid(out, xb, lengths, layout(model))
    return out, valid


def _batch_valid(out, xb, lengths, batch_first):
    """The batch's valid mask, when the output keeps the input's (batch, time) axes."""
    if np.ndim(out) < 2 or np.shape(out)[:2] != np.shape(xb)[:2]:
        return None
    return valid_from_lengths(lengths, np.shape(xb)[1 if batch_first else 0], batch_first)


def eval_batches(model, data, order, batch_size):
    """(index, output, targets, valid) of every batch of ``order`` (indices into ``data``), in
    eval mode with the stateful layers' state forgotten first."""
    model.eval()
    reset_stateful(model)
    for start in range(0, len(order), batch_size):
        index = order[start : start + batch_size]
        xb, yb, lb = data.batch(index)
        out, valid = forward(model, xb, lb)
        yield index, out, yb, valid


def eval_order(data, bucket):
    """The order evaluate and predict run the data in: by length, longest first, when the data
    has lengths and ``bucket`` (similar lengths together: less padding), else as given."""
    if bucket and data.lengths is not None:
        return np.argsort(-data.lengths, kind="stable")
    return np.arange(len(data))


def stream_windows(tokens, batch_size, bptt):
    """Truncated-BPTT batches of a long token stream: the stream is cut into ``batch_size``
    parallel streams, read ``bptt`` steps at a time. Returns ``(x, y)`` of shape
    (windows, batch_size, bptt), y the next tokens."""
    tokens = np.asarray(tokens)
    per_stream = (len(tokens) - 1) // batch_size // bptt * bptt
    if per_stream == 0:
        raise ValueError(
            f"tokens: a stream of {len(tokens)} is too short for batch_size "
            f"{batch_size} x bptt {bptt}"
        )
    used = per_stream * batch_size
    x = tokens[:used].reshape(batch_size, -1, bptt).transpose(1, 0, 2)
    y = tokens[1 : used + 1].reshape(batch_size, -1, bptt).transpose(1, 0, 2)
    return x, y


def window_losses(model, tokens, loss_fn, streams, bptt, part):
    """``(sum of the per-window losses, windows)`` of a stream cut into ``streams`` in eval
    mode, the state carried across windows; ``part(x, y)``: the streams of a window to run."""
    xs, ys = stream_windows(tokens, streams, bptt)
    model.eval()
    reset_stateful(model)
    total = 0.0
    for xb, yb in zip(xs, ys):
        xb, yb = part(xb, yb)
        out = model(xb)
        total += loss_fn(out[0] if isinstance(out, tuple) else out, yb)[0]
    return total, len(xs)
