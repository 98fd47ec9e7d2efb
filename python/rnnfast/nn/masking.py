"""How padding travels through a model (Keras's mask propagation, without tensors to carry it).

A container calls each of its layers through :func:`call_layer` with the batch's *valid mask*:
a boolean array shaped like the data's two leading axes, in the data's own layout ((B, T) for
batch-first data, (T, B) for time-major), True on real steps. The layer says what it does with
the mask (its ``call_with_padding``, the layer protocol's: ``nn._layer``), and returns its
output and the valid mask of that output:

- an ``Embedding`` with ``mask_zero`` / ``padding_idx`` makes one from its ids
  (:func:`embedding_padding`);
- an ``RNN`` consumes it as lengths (its own ``batch_first`` says which axis is time) and passes
  it on when it returns a sequence; one that returns its last output ends it (:func:`call_rnn`);
- ``Dense``, ``Dropout`` and any layer whose output keeps the input's leading axes pass it on,
  others end it (:func:`pass_padding_on`, the base class's rule).

A mask shaped like the leading axes needs no layout to be applied to targets of the same shape,
so losses and metrics take it as it comes: ``batch_first`` is said once, on the RNN.

When no mask was given, the call still tracks the positions that *look* like end padding (id 0,
or an all-zero feature vector, in trailing runs of different lengths) and warns when an RNN would
read past them (its last output, or a reverse direction that starts in the padding).
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = [
    "PaddingWarning",
    "call_layer",
    "pass_padding_on",
    "batch_first_of",
    "call_rnn",
    "embedding_padding",
    "input_suspect",
    "input_valid_mask",
    "prefix_lengths",
    "valid_from_lengths",
]


class PaddingWarning(UserWarning):
    """A batch looks padded but no lengths or mask reached the RNN that would read the padding."""


class _PrefixMask(np.ndarray):
    """A valid mask made from lengths, which it keeps: the RNN it reaches takes them as they
    are instead of checking the mask for a prefix again (a result of NumPy arithmetic on it is
    a plain mask again: no attribute survives)."""

    lengths = None
    batch_first = None


def valid_from_lengths(lengths, steps, batch_first):
    """The valid mask of a padded batch from its lengths: (B, T) if batch_first else (T, B)."""
    lengths = np.asarray(lengths)
    bt = np.arange(steps)[None, :] < lengths[:, None]
    valid = (bt if batch_first else bt.T).view(_PrefixMask)
    valid.lengths, valid.batch_first = lengths, batch_first
    return valid


def _trailing_run(flags_bt):
    """Per row of a (B, T) boolean array, the length of its trailing run of True."""
    steps = flags_bt.shape[1]
    if steps == 0:
        return np.zeros(flags_bt.shape[0], dtype=np.int64)
    last_false = np.where(~flags_bt, np.arange(steps)[None, :], -1).max(axis=1)
    return steps - 1 - last_false


def _looks_end_padded(suspect_bt):
    """Trailing runs of padding-like steps of different lengths, one of at least two steps:
    the signature of sequences of different lengths padded at the end, to the longest of them
    (a row without any) or to a fixed length beyond every one (pad_sequences(maxlen=...)).
    (A single trailing id 0 is too often a real token to warn about.)"""
    steps = suspect_bt.shape[1]
    if steps < 3 or suspect_bt.shape[0] < 2:
        return False
    run = _trailing_run(suspect_bt)
    # a quarter of the sequence: chance runs of a real token 0 are rarely that long (with a
    # vocabulary of 10, 1e-5 per row at T = 20), padding to the longest sequence usually is
    return bool(run.max() >= max(2, -(-steps // 4)) and run.min() < run.max())


def _reads_past_the_end(rnn):
    """Would padding at the end change what this RNN hands on, when it runs without lengths?"""
    last_output = rnn.return_sequences is False
    return last_output or rnn.bidirectional or rnn.go_backwards


def input_suspect(x, valid):
    """The steps of a model's input that look like padding, when no lengths came with it:
    all-zero feature vectors of a float batch (ids are judged by the Embedding that reads
    them). Only the input is judged: inside a model, a relu layer's zeros are real outputs."""
    if (
        valid is not None
        or not isinstance(x, np.ndarray)
        or x.dtype.kind != "f"
        or x.ndim != 3
        or x.shape[2] < 2
    ):
        return None  # one-feature series have real zeros; a real all-zero vector is rare
    # judged only if an RNN would read past the end (a pass over x, kept off the usual path)
    return _ZeroSteps(x)


class _ZeroSteps:
    """A float input's all-zero steps, computed when called. A class, not a closure: a
    Module's kept training forward (and so the Module) must stay picklable."""

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __call__(self):
        return ~np.any(self.x != 0, axis=2)


def _caller_level():
    """The stacklevel of the first frame outside rnnfast: the user's line that made the call."""
    import os
    import sys

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def _warn_if_padded(rnn, suspect, who):
    if suspect is None:
        return
    if callable(suspect):  # a model input's all-zero steps, judged now that it matters
        suspect = suspect()
    bt = suspect if rnn.batch_first else suspect.T
    if _looks_end_padded(bt):
        what = (
            "its last output"
            if rnn.return_sequences is False
            else "its reverse direction"
            if rnn.bidirectional
            else "go_backwards"
        )
        warnings.warn(
            f"{who}: the batch looks padded at the end (trailing steps of id 0 or all-zero "
            f"features, of different lengths per sequence), but no lengths reached this RNN, so "
            f"{what} reads the padding. Pass lengths= or mask= to the model (or fit), build the "
            "Embedding with mask_zero=True or padding_idx=, or give fit the ragged sequences",
            PaddingWarning,
            stacklevel=_caller_level(),
        )


def _keeps_leading_axes(x, out):
    return (
        valid_shape(x) is not None
        and isinstance(out, np.ndarray)
        and out.shape[:2] == np.shape(x)[:2]
    )


def valid_shape(x):
    shape = np.shape(x)
    return shape[:2] if len(shape) >= 2 else None


def call_layer(layer, x, valid, suspect, who, **kwargs):
    """``layer(x, **kwargs)`` with the padding carried through: ``(out, valid, suspect)`` of the
    output, as the layer's ``call_with_padding`` says. ``who`` names the layer in messages
    ("layers[1]", "self.rnn")."""
    carry = getattr(layer, "call_with_padding", None)
    if carry is None:  # a layer-like object outside the protocol: the base class's rule
        return pass_padding_on(layer, x, valid, suspect, **kwargs)
    return carry(x, valid, suspect, who, **kwargs)


def pass_padding_on(layer, x, valid, suspect, **kwargs):
    """``layer(x, **kwargs)`` passing the padding on when the output keeps the input's two
    leading axes (the same steps), ending it otherwise."""
    out = layer(x, **kwargs)
    if _keeps_leading_axes(x, out):
        return out, valid, suspect
    return out, None, None


def embedding_padding(layer, ids, valid):
    """(valid, suspect) of an Embedding's output: its own mask (mask_zero / padding_idx) joined
    with the one given, or, with neither, the ids equal to 0 as suspected padding."""
    ids = np.asarray(ids)
    own = layer.valid_positions(ids)
    if own is not None:
        return (own if valid is None else (valid & own)), None
    if valid is None and ids.ndim == 2 and ids.dtype.kind in "iu":
        return None, ids == 0
    return valid, None


def prefix_lengths(valid, batch_first):
    """The lengths of a valid mask whose rows are prefixes (padding at the end), else None."""
    if (
        isinstance(valid, _PrefixMask)
        and valid.batch_first == batch_first
        and valid.lengths is not None
    ):
        return valid.lengths
    bt = valid if batch_first else valid.T
    lengths = bt.sum(axis=1, dtype=np.int64)
    prefix = np.arange(bt.shape[1])[None, :] < lengths[:, None]
    return lengths if np.array_equal(bt, prefix) else None


def call_rnn(rnn, x, valid, suspect, who, embedding=None, **kwargs):
    """An RNN call with the padding carried: lengths from a valid mask padded at the end, or
    Keras's general mask from any other (a masked step keeps the previous state), unless the
    caller gave lengths or mask itself; the output's valid mask when it returns a sequence."""
    given = kwargs.get("lengths") is not None or kwargs.get("mask") is not None
    if embedding is not None and not given:  # token input: the Embedding's own padding
        valid, suspect = embedding_padding(embedding, x, valid)
    if given:
        valid = None  # the caller's own lengths or mask win; the RNN checks them
    elif valid is not None:
        expected = valid_shape(x)
        if valid.shape != expected:
            raise ValueError(
                f"{who}: expected a valid mask of shape {expected} (x's leading "
                f"axes), got shape {valid.shape}"
            )
        lengths = prefix_lengths(valid, rnn.batch_first)
        # an explicit zero_output_for_mask=False (Keras's) repeats the last output over the
        # padding, which a mask gives and lengths (zeros past the end) do not
        repeats = getattr(rnn, "zero_output_for_mask", None) is False and rnn.return_sequences
        if lengths is not None and not repeats:
            kwargs["lengths"] = lengths
        else:
            kwargs["mask"] = valid if rnn.batch_first else valid.T
    elif _reads_past_the_end(rnn):
        _warn_if_padded(rnn, suspect, who)
    if embedding is not None:
        kwargs["embedding"] = embedding
    out = rnn(x, **kwargs)
    if rnn.return_sequences is False:
        return out, None, None
    if valid is None and not given:
        return out, None, suspect
    return out, _output_valid(rnn, x, kwargs), None


def _output_valid(rnn, x, kwargs):
    """The valid mask of an RNN's output sequence, from the lengths or mask it ran with."""
    steps = valid_shape(x)[1] if rnn.batch_first else valid_shape(x)[0]
    lengths, mask = kwargs.get("lengths"), kwargs.get("mask")
    if lengths is None:
        bt = np.asarray(mask).astype(bool)
        lengths = prefix_lengths(bt, True)
    if lengths is not None:
        lengths = np.asarray(lengths, dtype=np.int64)
        if not rnn.go_backwards:
            return valid_from_lengths(lengths, steps, rnn.batch_first)
        # Keras order: each sequence's reversed steps come after its padding
        bt = np.arange(steps)[None, :] >= (steps - lengths)[:, None]
    elif rnn.go_backwards:
        bt = bt[:, ::-1]  # the output is in processing order, as the mask it ran with
    return bt if rnn.batch_first else bt.T


def batch_first_of(layers, who):
    """The ``batch_first`` that the layers reading sequences among ``layers`` (and inside nested
    containers) agree on, or None when none of them says; ValueError when they disagree."""
    seen = {}

    def visit(layer, name):
        children = getattr(layer, "named_children", None)
        if children is None:
            batch_first = getattr(layer, "batch_first", None)
            if batch_first is not None:
                seen.setdefault(bool(batch_first), name)
            return
        for child_name, child in children():
            visit(child, f"{name}.{child_name}")

    for i, layer in enumerate(layers):
        visit(layer, f"{who}[{i}]")
    if len(seen) > 1:
        raise ValueError(
            f"{who}: its layers disagree on batch_first ({seen[True]} is batch-first, "
            f"{seen[False]} time-major); build them with the same batch_first"
        )
    return next(iter(seen), None)


def input_valid_mask(model, x, lengths, mask):
    """The valid mask of a model's input from the caller's ``lengths`` (B,) or Keras-style
    ``mask`` (B, T), in the layout of the model's RNNs; None when neither is given."""
    from .._validation import check_lengths

    if lengths is None and mask is None:
        return None
    if lengths is not None and mask is not None:
        raise ValueError("lengths, mask: give one of them, not both")
    shape = valid_shape(x)
    if shape is None:
        raise ValueError(f"x: lengths or mask need a batch of sequences, got shape {np.shape(x)}")
    batch_first = model.batch_first
    batch_first = True if batch_first is None else batch_first  # Keras's layout by default
    batch, steps = shape if batch_first else shape[::-1]
    if mask is not None:
        m = np.asarray(mask)
        if m.shape != (batch, steps):
            raise ValueError(
                f"mask: expected shape (B, T) = {(batch, steps)} (the model is "
                f"{'batch-first' if batch_first else 'time-major'}), got shape "
                f"{m.shape}"
            )
        if m.dtype.kind not in "biu" or (m.size and (m.min() < 0 or m.max() > 1)):
            raise TypeError(f"mask: expected a boolean (B, T) array, got dtype {m.dtype}")
        m = m.astype(bool)  # Keras's mask: any steps may be masked, not only the end
        return m if batch_first else m.T
    lengths = check_lengths(lengths, steps, batch)
    return valid_from_lengths(lengths, steps, batch_first)
