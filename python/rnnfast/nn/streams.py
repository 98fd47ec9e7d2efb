"""Many independent streams on one layer (a speech or sensor server): ``Streams`` holds the
state of each stream and steps any subset of them in one batched call of the layer's own
``step``, gathering their states into one contiguous batch and scattering the new ones back.

Nothing here knows a cell. The form of a layer's state (the GRU's ``h`` (num_layers, B, H), the
LSTM's pair ``(h, c)``, a dilated layer's rings, a quantized copy's) is read from the layer's
own ``step`` once, at construction: each array of the state is stored with its batch axis as
long as the capacity, and that axis is found as the one that follows the batch."""

from __future__ import annotations

import numpy as np

from .._validation import (
    as_float_array,
    check_bool_mask,
    check_int_array,
    check_positive_int,
    shape_error,
    type_error,
    value_error,
)

__all__ = ["Streams"]


def _leaves(state):
    """The arrays of a state (a nested tuple or list of arrays), depth first."""
    if isinstance(state, (tuple, list)):
        return [leaf for part in state for leaf in _leaves(part)]
    return [state]


def _form(state):
    """The state's nesting without its arrays (None where an array goes): ``_rebuild`` fills it."""
    if isinstance(state, (tuple, list)):
        return type(state)(_form(part) for part in state)
    return None


def _rebuild(form, leaves):
    """``form`` filled with ``leaves`` (an iterator), in ``_leaves``'s order."""
    if form is None:
        return next(leaves)
    return type(form)(_rebuild(part, leaves) for part in form)


def _batch_axis(one, two):
    """The batch axis of a state array, from the same array at a batch of 1 and of 2: the one
    axis where they differ, by 1 against 2; None where there is no such axis."""
    if not (isinstance(one, np.ndarray) and isinstance(two, np.ndarray)) or one.ndim != two.ndim:
        return None
    differ = [a for a, (m, n) in enumerate(zip(one.shape, two.shape)) if m != n]
    if len(differ) != 1 or (one.shape[differ[0]], two.shape[differ[0]]) != (1, 2):
        return None
    return differ[0]


class _Part:
    """One array of the streams' state: the store (the state's shape with the batch axis
    ``capacity`` long), the flat buffer a gather writes into (reused by every call), and the
    index that selects streams along the batch axis."""

    def __init__(self, like, axis, capacity, dtype):
        shape = list(like.shape)
        shape[axis] = capacity
        self.axis, self.inner = axis, tuple(shape)
        self.per_stream = like.size  # elements of one stream's state
        self.store = np.zeros(shape, dtype=dtype)
        self.buffer = np.empty(self.store.size, dtype=dtype)
        self.before = (slice(None),) * axis

    def shape(self, k):
        """The shape of this array for a batch of k streams."""
        return self.inner[: self.axis] + (k,) + self.inner[self.axis + 1 :]

    def gather(self, ids):
        """The streams ``ids``' states as a contiguous batch, in the reused buffer."""
        shape = self.shape(ids.size)
        out = self.buffer[: ids.size * self.per_stream].reshape(shape)
        # mode="clip": ids are checked already, and "raise" would buffer the output
        np.take(self.store, ids, axis=self.axis, out=out, mode="clip")
        return out

    def scatter(self, ids, values):
        self.store[self.before + (ids,)] = values


class Streams:
    """The states of ``capacity`` independent streams of one recurrent layer, stepped in
    batches: a server's sessions, each its own sequence, arriving at their own times.

    ``streams.step(ids, x)`` runs one time step of the streams ``ids`` in one call of the
    layer's own ``step`` with a batch of ``len(ids)``: their states are gathered from the
    store into one contiguous batch (``np.take`` into a buffer reused across calls), stepped,
    and the new states written back; the other streams' states stay as they are. Each stream
    starts from zeros and counts its steps (:attr:`lengths`); :meth:`reset` starts streams
    over, from zeros or a given state, and ``step(..., reset=mask)`` starts some of the
    stepped streams over first.

    Every layer whose ``step(x_t, state)`` returns ``(out_t, state_next)`` with a batch axis
    works, in its own dtype and products: RNN (tanh, relu, leaky units), GRU (both forms), LSTM
    (projections, peepholes, ``input_forget``, ``cell_clip``), LayerNormLSTM,
    DeepTransitionRNN, stacked and dilated layers, float32 and float64, ``precision="bf16"``
    layers and the bf16 / int8 copies ``rnnfast.quantize`` makes. A stream's outputs are those
    of ``layer.step`` called on that stream alone, up to the rounding of a batched product.

    Parameters
    ----------
    layer : recurrent layer
        The layer to step, unidirectional (a bidirectional layer needs each whole sequence)
        and not ``stateful`` (the streams hold the states). Its parameters are read live at
        each step, as ``layer.step`` reads them.
    capacity : int
        The number of streams, ids ``0 .. capacity - 1``.

    Raises
    ------
    TypeError
        ``layer`` has no ``step(x_t, state) -> (out_t, state_next)``; ``capacity`` is not an
        int.
    ValueError
        ``layer`` is bidirectional or stateful; ``capacity`` < 1.

    Examples
    --------
    >>> import numpy as np, rnnfast
    >>> streams = rnnfast.Streams(rnnfast.GRU(16, 32).eval(), capacity=1000)
    >>> x = np.ones((3, 16), dtype=np.float32)
    >>> streams.step([4, 17, 512], x).shape
    (3, 32)
    >>> streams.lengths[[4, 17, 512, 0]]
    array([1, 1, 1, 0])

    Not thread-safe: one ``Streams`` is stepped by one thread at a time (its buffers are
    reused by every call).
    """

    def __init__(self, layer, capacity):
        self._capacity = check_positive_int("capacity", capacity)
        step = getattr(layer, "step", None)
        if not callable(step):
            raise type_error("layer", "a recurrent layer with step(x_t, state)", layer)
        if getattr(layer, "bidirectional", False):
            raise ValueError(
                "layer: expected a unidirectional layer, got bidirectional=True (its reverse "
                "direction starts at the end of each sequence, which a stream has not "
                "reached); build the layer with bidirectional=False"
            )
        if getattr(layer, "stateful", False):
            raise ValueError(
                "layer: expected stateful=False (the streams hold the states), got a stateful "
                "layer; set layer.stateful = False"
            )
        self._layer = layer
        self._dtype = np.dtype(getattr(layer, "dtype", np.float32))
        self._input_size = layer.input_size
        out, parts = self._probe(step)
        self._output_size = out.shape[-1]
        self._lengths = np.zeros(self._capacity, dtype=np.int64)
        # distinct ids (see _ids): a stamp per stream, and the positions 0, 1, ... it is set to
        self._stamp = np.zeros(self._capacity, dtype=np.intp)
        self._positions = np.arange(self._capacity, dtype=np.intp)
        self._parts = parts

    def _probe(self, step):
        """The form of the layer's state and its batch axes, from steps at a batch of 1 and 2:
        ``(an output, [_Part per array of the state])``."""
        results = [step(np.zeros((b, self._input_size), dtype=self._dtype)) for b in (1, 2)]
        if not all(isinstance(r, tuple) and len(r) == 2 for r in results):
            raise type_error(
                "layer",
                "a layer whose step(x_t, state) returns (out_t, state_next)",
                type(self._layer),
            )
        (out, one), (_, two) = results
        self._form = _form(one)
        pairs = list(zip(_leaves(one), _leaves(two)))
        axes = [_batch_axis(a, b) for a, b in pairs]
        if None in axes or _form(two) != self._form or np.ndim(out) != 2:
            raise type_error(
                "layer",
                "a layer whose step returns its output (B, R) and a state with a batch axis",
                type(self._layer),
            )
        dtype = self._dtype
        return out, [_Part(a, axis, self._capacity, dtype) for (a, _), axis in zip(pairs, axes)]

    # ---- properties ------------------------------------------------------------------------------

    @property
    def layer(self):
        """The layer the streams step."""
        return self._layer

    @property
    def capacity(self):
        """The number of streams (ids ``0 .. capacity - 1``)."""
        return self._capacity

    @property
    def lengths(self):
        """Steps each stream has taken since its last reset: int64 (capacity,), a copy."""
        return self._lengths.copy()

    def __len__(self):
        return self._capacity

    def __repr__(self):
        return f"Streams({self._layer!r}, capacity={self._capacity})"

    # ---- the calls -------------------------------------------------------------------------------

    def step(self, ids, x, reset=None):
        """One time step of the streams ``ids``, in one batched call of ``layer.step``.

        Parameters
        ----------
        ids : array-like of int, shape (k,)
            Distinct stream ids in ``[0, capacity)``, in any order; k = 0 steps nothing.
        x : array-like, shape (k, input_size)
            Row i is stream ``ids[i]``'s input, in the layer's dtype.
        reset : array-like of bool, shape (k,), optional
            Streams whose row is True start over from zeros (their length from 0) before
            this step: a new utterance on a stream's id.

        Returns
        -------
        ndarray, shape (k, R)
            Row i is stream ``ids[i]``'s output (R: the layer's ``step`` output width).

        Raises
        ------
        TypeError
            ``ids`` not integers; ``x`` not of the layer's float dtype; ``reset`` not bools.
        ValueError
            ``ids`` not 1-D, out of range or repeated; ``x`` or ``reset`` of another shape.
            Nothing changes on an error.
        """
        ids = self._ids(ids)
        k = ids.size
        x = as_float_array("x", x, self._dtype)
        if x.shape != (k, self._input_size):
            raise shape_error("x", f"(len(ids), input_size) = ({k}, {self._input_size})", x)
        if reset is not None:
            reset = check_bool_mask("reset", reset, (k,), f"(len(ids),) = ({k},)")
        if k == 0:
            return np.empty((0, self._output_size), dtype=self._dtype)
        parts = self._parts
        gathered = [p.gather(ids) for p in parts]
        if reset is not None and reset.any():
            for p, g in zip(parts, gathered):
                g[p.before + (reset,)] = 0
        out, new = self._layer.step(x, _rebuild(self._form, iter(gathered)))
        for p, leaf in zip(parts, _leaves(new)):
            p.scatter(ids, leaf)
        if reset is not None:
            self._lengths[ids[reset]] = 0
        self._lengths[ids] += 1
        return out

    def reset(self, ids=None, state=None):
        """Start streams over: their state zeros, or ``state``, and their length 0.

        Parameters
        ----------
        ids : array-like of int, shape (k,), optional
            Distinct stream ids; None: every stream.
        state : optional
            The state to start from, in the form of :meth:`state` (the form of the layer's
            ``step``: GRU ``h`` (num_layers, k, H), LSTM ``(h, c)``, ...), each array with its
            batch axis of length k, or without the batch axis (one state for every stream
            reset). None: zeros.

        Raises
        ------
        TypeError, ValueError
            As :meth:`step` for ``ids``; ``state`` of another form, dtype or shape. Nothing
            changes on an error.
        """
        ids = self._positions if ids is None else self._ids(ids)
        k = ids.size
        if state is None:
            values = [0] * len(self._parts)
        else:
            values = self._state_arrays(state, k)
        for p, v in zip(self._parts, values):
            p.scatter(ids, v)
        self._lengths[ids] = 0

    def state(self, ids=None):
        """The states of streams ``ids`` (None: every stream), as the layer's ``step`` takes
        and returns them with a batch of ``len(ids)`` (GRU ``h`` (num_layers, k, H), LSTM
        ``(h, c)``, a dilated layer's rings): copies, in the order of ``ids``."""
        ids = self._positions if ids is None else self._ids(ids)
        taken = [np.take(p.store, ids, axis=p.axis) for p in self._parts]
        return _rebuild(self._form, iter(taken))

    # ---- checks ----------------------------------------------------------------------------------

    def _ids(self, ids):
        """``ids`` checked (1-D, integers, in range, distinct) as an intp array (a copy where
        the caller's is of another integer type: it is never written)."""
        arr = check_int_array("ids", ids)
        if arr.ndim != 1:
            raise shape_error("ids", "(k,) (a 1-D array of stream ids)", arr)
        # in range in one pass: a negative id seen as unsigned is above any capacity (another
        # integer type is checked as it came, before its conversion could wrap it)
        wide = arr.view(np.uintp) if arr.dtype == np.intp else arr
        if arr.size and not (wide.max() < self._capacity and (wide is not arr or arr.min() >= 0)):
            bad = arr[(arr < 0) | (arr >= self._capacity)][0]
            raise value_error("ids", f"stream ids in [0, capacity) = [0, {self._capacity})", bad)
        arr = arr.astype(np.intp, copy=False)
        # distinct: each id's stamp set to its position; a repeated id keeps its last position,
        # so its first reads back another one (two passes of k, no sort)
        positions = self._positions[: arr.size]
        self._stamp[arr] = positions
        if not (self._stamp[arr] == positions).all():
            seen = np.unique(arr, return_counts=True)
            twice = seen[0][seen[1] > 1]
            raise ValueError(
                f"ids: expected distinct stream ids, got {twice.size} repeated "
                f"({', '.join(map(str, twice[:5]))}{', ...' if twice.size > 5 else ''})"
            )
        return arr

    def _state_arrays(self, state, k):
        """``state`` (reset's) as one array per part, each broadcastable into the store's
        selection of k streams, checked whole before anything is written."""
        if _form(state) != self._form:
            expected = self._describe_form(k)
            raise type_error("state", f"a state of the form {expected}", state)
        arrays = []
        for i, (p, leaf) in enumerate(zip(self._parts, _leaves(state))):
            name = "state" if len(self._parts) == 1 else f"state part {i}"
            arr = as_float_array(name, leaf, self._dtype)
            full = p.shape(k)
            alone = full[: p.axis] + full[p.axis + 1 :]
            if arr.shape == alone:
                arr = np.expand_dims(arr, p.axis)
            elif arr.shape != full:
                raise shape_error(name, f"{full}, or {alone} for every stream", arr)
            arrays.append(arr)
        return arrays

    def _describe_form(self, k):
        """The state's form for k streams, for a message: ``(array (1, k, 8), array (1, k,
        16))``."""
        shapes = iter(f"array {p.shape(k)}" for p in self._parts)

        def text(form):
            if form is None:
                return next(shapes)
            inner = ", ".join(text(f) for f in form)
            return f"({inner})" if isinstance(form, tuple) else f"[{inner}]"

        return text(self._form)
