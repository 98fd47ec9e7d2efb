"""The RNN layer's API forms: what a call returns (PyTorch's ``(y, h_n)``, Keras's last output,
sequences and states, the two directions merged or, with merge_mode=None, apart) and how the
gradient of each form goes back to the stack runner's output sequence. Functions of the
recurrent layer (``nn.recurrent.rnn``), which it calls on itself."""

from __future__ import annotations

import numpy as np

from ..._validation import (
    as_float_array,
)

__all__ = [
    "output_batch_axis",
    "output_form",
    "output_gradient",
    "returned_output",
    "top_gradient",
    "without_axis",
]


def output_batch_axis(batch_first, last):
    """Where a returned output has its batch axis: Keras's last output (B, out) and batch-first
    sequences (B, T, out) first, time-major sequences (T, B, out) second."""
    return 0 if (last or batch_first) else 1


def without_axis(a, axis):
    """The view of ``a`` at index 0 of ``axis`` (of length one): the axis dropped."""
    return a[(slice(None),) * axis + (0,)]


def returned_output(layer, out, last, reorder, rev, lengths, o):
    """``(result, out, o_last)`` from the stack's output sequence (processing order, the
    batch sorted): Keras's last output or the whole sequence, merged, in the caller's batch
    order and layout; ``out`` unsorted (the sequence) and ``o_last`` (the last output) are
    what the merge's gradient reads."""
    if last:
        o_last = reorder.unsort(_last_of(layer, out, reorder.lengths), 0)
        return _merge(layer, o_last, o.merge_mode), out, o_last
    out = reorder.unsort(out, 1)  # the caller's batch order from here on
    result = _merge(layer, out, o.merge_mode)
    if o.go_backwards and lengths is not None:
        # Keras order: the reversed valid steps, after the padded ones (zeros)
        result = np.ascontiguousarray(rev(result)[::-1])
    if o.batch_first:
        result = result.swapaxes(0, 1)
    return result, out, None


def output_form(layer, result, h_n, o):
    """What a call returns: PyTorch's ``(y, h_n)`` or Keras's forms, with the two
    directions' outputs as ``[forward, backward]`` for merge_mode=None (Keras flattens
    the states after them: ``[forward, backward, h_n]``)."""
    if o.merge_mode is None:
        R = layer.cell.output_width(layer)
        result = [result[..., :R], result[..., R:]]
    if not o.keras:
        return result, h_n
    if not o.return_state:
        return result
    # the states after the output, each flat: h_n, or an LSTM's h_n, c_n
    states = tuple(h_n) if layer.cell.num_states > 1 else (h_n,)
    return [*result, *states] if o.merge_mode is None else (result, *states)


def _last_of(layer, out, lengths):
    """Keras's last output of each direction (B, dirs*H): the forward direction at each
    sequence's own last step, the reverse direction at its first (where it ends); zeros
    for an empty sequence."""
    steps, batch = out.shape[0], out.shape[1]
    if steps == 0:  # every sequence is empty
        return np.zeros((batch, out.shape[2]), dtype=layer.dtype)
    fwd, rev = _direction_columns(layer, out.shape[2])
    if lengths is None:
        res = out[steps - 1].copy()
    else:
        ran = (lengths > 0)[:, None]
        res = np.where(ran, out[np.maximum(lengths - 1, 0), np.arange(batch)], 0)
    if rev is not None:
        res[:, rev] = out[0][:, rev] if lengths is None else np.where(ran, out[0][:, rev], 0)
    return np.ascontiguousarray(res, dtype=layer.dtype)


def _direction_columns(layer, width):
    """``(forward, reverse)`` column indices of an output ``width`` wide: blocks of R
    columns, one per direction of each layer it holds (the last layer's, or every layer's
    with ``all_to_output``), the reverse ones odd; reverse None when unidirectional."""
    if not layer.bidirectional:
        return slice(None), None
    R = layer.cell.output_width(layer)
    block = (np.arange(width) // R) % 2
    return np.flatnonzero(block == 0), np.flatnonzero(block == 1)


def _merge(layer, o, merge_mode):
    """The two directions of the last layer (..., 2H) merged as ``merge_mode`` says;
    concatenated ones (and merge_mode=None's, split only when returned) pass as they are."""
    if not layer.bidirectional or merge_mode in ("concat", None):
        return o
    H = layer.cell.output_width(layer)
    f, r = o[..., :H], o[..., H:]
    if merge_mode == "sum":
        return f + r
    if merge_mode == "mul":
        return f * r
    return (f + r) * 0.5


def _unmerge(layer, d, src, merge_mode):
    """Gradient of the merge: from d (..., out) to (..., dirs*H)."""
    if not layer.bidirectional or merge_mode in ("concat", None):
        return d
    H = layer.cell.output_width(layer)
    if merge_mode == "sum":
        return np.concatenate([d, d], axis=-1)
    if merge_mode == "ave":
        half = d * 0.5
        return np.concatenate([half, half], axis=-1)
    return np.concatenate([d * src[..., H:], d * src[..., :H]], axis=-1)


def top_gradient(
    layer, d_output, dh_n, last, run, reorder, rev, lengths, merge_src, o, steps, batch
):
    """``(d_out, dh_n)`` for the stack: the gradient of the returned output as one of the
    top layer's output sequence, in processing order with the batch sorted (None: zero),
    or, for a last output that is each direction's h_n, added into dh_n instead."""
    if d_output is None:
        return None, dh_n
    if not last:
        d = d_output.swapaxes(0, 1) if o.batch_first else d_output
        if o.go_backwards and lengths is not None:
            d = rev(d[::-1])
        return reorder.sort(_unmerge(layer, d, merge_src, o.merge_mode), 1), dh_n
    d_last = reorder.sort(_unmerge(layer, d_output, merge_src, o.merge_mode), 0)
    if steps == 0:
        return None, dh_n  # every sequence is empty: its (zero) last output depends on nothing
    if (o.residual and layer.num_layers > 1) or run.step_mask is not None or o.all_to_output:
        # the last output is the output sequence's last step (with a mask it can differ
        # from h_n: zeros for a sequence without a kept step; with all_to_output it
        # holds every layer's)
        return _last_gradient_sequence(layer, d_last, run.lengths, steps, batch), dh_n
    # Each direction's last output is its state at the sequence's end, h_n: the gradient
    # enters there, and no (T, B, H) gradient of zeros is built.
    return None, _add_last_gradient_to_state(layer, d_last, run.lengths, dh_n, batch)


def output_gradient(layer, d_output, o, out_shape, last, unbatched):
    """The gradient of what the forward returned, checked, as one array shaped like the
    forward's batched output ``out_shape`` (directions concatenated); None stays None."""
    name = "dy" if not o.keras else "d_output"
    axis = output_batch_axis(o.batch_first, last) if unbatched else None
    shown = out_shape if axis is None else out_shape[:axis] + out_shape[axis + 1 :]
    if o.merge_mode is None:
        d_output = _join_directions(layer, name, d_output, shown)
    if d_output is None:
        return None
    d_output = np.asarray(d_output)
    got = d_output.shape
    if got != shown:
        # dtype first: a float64 gradient for a float32 layer gets the message with the fix
        as_float_array(name, d_output, layer.dtype)
        raise ValueError(f"{name}: expected shape {shown} (like the output), got shape {got}")
    if axis is not None:
        d_output = np.expand_dims(d_output, axis)
    # Batch-first sequences are converted through their time-major view: a gradient that
    # is time-major in memory already (one computed from our own output, the usual case)
    # then goes to the kernels without a copy.
    swap = o.batch_first and not last
    d_output = as_float_array(name, d_output.swapaxes(0, 1) if swap else d_output, layer.dtype)
    return d_output.swapaxes(0, 1) if swap else d_output


def _join_directions(layer, name, d_output, shape):
    """merge_mode=None: the gradients ``[d_forward, d_backward]`` of the two outputs as
    one of their concatenation, ``shape`` (..., 2H); None parts are zeros, None for both
    (or for the whole) stays None."""
    if d_output is None:
        return None
    if not isinstance(d_output, (list, tuple)) or len(d_output) != 2:
        what = (
            f"a {type(d_output).__name__} of {len(d_output)}"
            if isinstance(d_output, (list, tuple))
            else type(d_output).__name__
        )
        raise TypeError(
            f"{name}: merge_mode=None returns [forward, backward]; expected the list "
            f"[d_forward, d_backward] of their gradients, got {what}"
        )
    if d_output[0] is None and d_output[1] is None:
        return None
    part = shape[:-1] + (layer.cell.output_width(layer),)
    parts = []
    for i, d in enumerate(d_output):
        if d is None:
            parts.append(np.zeros(part, dtype=layer.dtype))
            continue
        arr = as_float_array(f"{name}[{i}]", d, layer.dtype)
        if arr.shape != part:
            raise ValueError(
                f"{name}[{i}]: expected shape {part} (like the "
                f"{('forward', 'backward')[i]} output), got shape {arr.shape}"
            )
        parts.append(arr)
    return np.concatenate(parts, axis=-1)


def _last_gradient_sequence(layer, d_last, lengths, steps, batch):
    """The gradient of Keras's last output (B, dirs*H) as one of the whole output sequence
    (T, B, dirs*H): zero but at each sequence's last step (the reverse direction: its first)."""
    d_out = np.zeros((steps, batch, d_last.shape[1]), dtype=layer.dtype)
    fwd, rev = _direction_columns(layer, d_last.shape[1])
    ran = np.arange(batch) if lengths is None else np.nonzero(lengths > 0)[0]
    ends = steps - 1 if lengths is None else lengths[ran] - 1
    if rev is None:
        d_out[ends, ran] = d_last[ran]
    else:
        d_out[ends[:, None] if lengths is not None else ends, ran[:, None], fwd] = d_last[
            np.ix_(ran, fwd)
        ]
        d_out[0, ran[:, None], rev] = d_last[np.ix_(ran, rev)]
    return d_out


def _add_last_gradient_to_state(layer, d_last, lengths, dh_n, batch):
    """dh_n (num_layers*dirs, B, S) plus the gradient of Keras's last output, which is the
    top layer's h_n of each direction (zero for an empty sequence, whose h_n is h0): the
    h part (the first R columns) of the joined state."""
    dirs, R = layer.num_directions, layer.cell.output_width(layer)
    S = layer.cell.state_width(layer)
    total = (
        np.zeros((layer.num_layers * dirs, batch, S), dtype=layer.dtype)
        if dh_n is None
        else dh_n.copy()
    )  # never the caller's array
    extra = d_last.reshape(batch, dirs, R).swapaxes(0, 1)
    if lengths is not None:
        extra = extra * (lengths > 0)[None, :, None]
    total[(layer.num_layers - 1) * dirs :, :, :R] += extra
    return total
