"""The RNN layer: stacked, bidirectional, variable-length composition over rnnfast.functional,
with its parameters, gradients and the training cache."""

from __future__ import annotations

import inspect
import math
import numbers
import operator
import warnings
from typing import NamedTuple

import numpy as np

from .. import functional
from .._parameters import ParameterOwner
from .._validation import (
    as_float_array,
    check_alpha,
    check_bool,
    check_lengths,
    check_nonlinearity,
    check_optional_bool,
    check_probability,
    layer_dtype,
)
from .stack import BatchOrder as _BatchOrder
from .stack import Reverser as _Reverser
from .stack import Run, stack_backward, stack_forward

__all__ = ["RNN"]

MERGE_MODES = ("concat", "sum", "mul", "ave", None)


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected a positive int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name}: expected a positive int, got {value}")
    return int(value)


# A dilated layer's next step reads the state d steps back: carrying it from one call to the
# next (stateful) or one step at a time (step) needs the last d states of every layer.
_DILATED_STREAMING = (
    "dilation: a dilated layer (dilation > 1) reads h_{t-d}, so stateful layers and step() "
    "would carry the last d states of every layer; not supported: run whole sequences"
)


class _Options(NamedTuple):
    """The options one forward ran with. Its backward reads them from here, not from the
    layer, so an option assigned between the two cannot make the gradient differ from the
    forward it differentiates."""

    nonlinearity: str
    alphas: list
    batch_first: bool
    go_backwards: bool
    residual: bool
    merge_mode: str | None
    keras: bool
    return_sequences: bool | None
    return_state: bool | None
    zero_output_for_mask: bool | None


def _read_only(name, why):
    """A property fixed at construction: reading gives the value, assigning raises an
    AttributeError that says to build a new layer."""

    def refuse(self, value):
        raise AttributeError(
            f"{name} is fixed at construction ({why}); build a new layer instead: "
            f"RNN(**{{**layer.get_config(), {name!r}: {value!r}}})"
        )

    # attrgetter: a C-level getter, as fast as reading the attribute itself
    return property(operator.attrgetter("_" + name), refuse, doc=f"Fixed at construction ({why}).")


def _output_batch_axis(batch_first, last):
    """Where a returned output has its batch axis: Keras's last output (B, out) and batch-first
    sequences (B, T, out) first, time-major sequences (T, B, out) second."""
    return 0 if (last or batch_first) else 1


def _without_axis(a, axis):
    """The view of ``a`` at index 0 of ``axis`` (of length one): the axis dropped."""
    return a[(slice(None),) * axis + (0,)]


class RNN(ParameterOwner):
    """Elman RNN layer with PyTorch's ``torch.nn.RNN`` interface (and Keras's options), on NumPy
    arrays.

    ``h_t = (1 - alpha) h_{t-1} + alpha act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)``, ``act``
    tanh or relu (``alpha = 1``, the default: the plain Elman unit).

    Parameters
    ----------
    input_size, hidden_size : int
    num_layers : int
        Stacked layers; layer k > 0 reads the (concatenated) outputs of layer k - 1.
    nonlinearity : {"tanh", "relu"}
    bias : bool
        When False the layer has no ``bias_ih_l{k}`` / ``bias_hh_l{k}``.
    batch_first : bool
        Input and output as (B, T, ...) instead of (T, B, ...); states stay (layers*dirs, B, H).
    dropout : float in [0, 1]
        Inverted dropout on the outputs of every layer but the last, in training mode only (as
        PyTorch; 1 zeroes them all); the masks are drawn from a generator seeded by ``seed``.
        With one layer there is nothing to drop: a UserWarning, as torch.
    bidirectional : bool
        A reverse direction per layer (parameters ``..._l{k}_reverse``); the reverse direction
        of a variable-length batch starts at each sequence's own end.
    dtype : float32 or float64
    seed : int, optional
        Seeds the initialisation U(-1/sqrt(H), 1/sqrt(H)) (PyTorch's) and the dropout masks.
    residual : bool
        Skip connections: the output of every layer k > 0 is its recurrent output plus its
        input (both layers*dirs wide). Needs num_layers >= 2.
    merge_mode : {"concat", "sum", "mul", "ave", None}
        How the two directions of the last layer are combined (Keras's ``Bidirectional``);
        between stacked layers they are always concatenated (PyTorch). None (Keras's): not
        combined, the output is the list ``[forward, backward]``. Only with ``bidirectional``.
    go_backwards : bool
        Keras's: the stack reads the sequences in reverse (each within its own length) and the
        output sequence is returned in that processing order; with lengths each sequence's
        padded steps then come first, as zeros.
    return_sequences, return_state : bool or None
        Both None (the default): a call returns PyTorch's ``(y, h_n)``. Either given: Keras's
        semantics, the output is the whole sequence if ``return_sequences`` else the last
        output (B, out) (each sequence's own last step; zeros for an empty sequence), and the
        call returns ``(output, h_n)`` if ``return_state`` else the output alone.
    stateful : bool
        Carry h_n from one call (or ``step``) to the next as its h0 when no h0 is given, until
        ``reset_state()``.
    alpha : float in (0, 1], or a list of one per layer
        Leak rate of leaky units.

    Every flag must be a bool (or ``np.bool_``): anything else is a TypeError, as torch's.
    The options may be assigned later and are checked as here; input_size, hidden_size,
    num_layers, bidirectional, bias, dtype and seed are fixed (assigning one is an
    AttributeError: build a new layer). Unbatched input, as torch: x (T, input_size) with h0
    (num_layers*dirs, H) gives outputs without the batch axis.

    Call ``layer(x, h0=None, lengths=None, mask=None)``; after a call in training mode,
    ``dx, dh0 = layer.backward(d_output, dh_n=None)`` adds the parameter gradients into
    ``layer.grads`` (keys as ``state_dict()``). ``lengths`` (B,) are the sequences' lengths in
    a padded batch; ``mask`` is the same as a Keras (B, T) prefix mask.
    """

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers=1,
        nonlinearity="tanh",
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        dtype=np.float32,
        seed=None,
        *,
        residual=False,
        merge_mode="concat",
        go_backwards=False,
        return_sequences=None,
        return_state=None,
        stateful=False,
        alpha=1.0,
        input_dropout=0.0,
        recurrent_dropout=0.0,
        zero_output_for_mask=None,
        dilation=1,
    ):
        self._input_size = _positive_int("input_size", input_size)
        self._hidden_size = _positive_int("hidden_size", hidden_size)
        self._num_layers = _positive_int("num_layers", num_layers)
        self._bias = check_bool("bias", bias)
        self._bidirectional = check_bool("bidirectional", bidirectional)
        self._dtype = layer_dtype(dtype)
        self._seed = seed
        self._state = None
        # The options below go through their setters: the same checks now and on assignment.
        self.nonlinearity = nonlinearity
        self.batch_first = batch_first
        self._dropout = self._checked_dropout(dropout)
        self.residual = residual
        self.merge_mode = merge_mode
        self.go_backwards = go_backwards
        self.return_sequences = return_sequences
        self.return_state = return_state
        self.stateful = stateful
        self.alpha = alpha
        self.input_dropout = input_dropout
        self.recurrent_dropout = recurrent_dropout
        self.zero_output_for_mask = zero_output_for_mask
        self.dilation = dilation

        rng = np.random.default_rng(seed)
        bound = 1.0 / math.sqrt(self.hidden_size)
        H = self.hidden_size
        self._names = []  # per (layer, direction), in PyTorch's order: l * dirs + d
        shapes = {}
        for layer in range(self.num_layers):
            width = self.input_size if layer == 0 else H * self.num_directions
            for direction in range(self.num_directions):
                sfx = f"_l{layer}" + ("_reverse" if direction else "")
                names = (
                    "weight_ih" + sfx,
                    "weight_hh" + sfx,
                    ("bias_ih" + sfx) if self.bias else None,
                    ("bias_hh" + sfx) if self.bias else None,
                )
                self._names.append(names)
                shapes[names[0]] = (H, width)
                shapes[names[1]] = (H, H)
                if self.bias:
                    shapes[names[2]] = (H,)
                    shapes[names[3]] = (H,)
        self._params = {
            name: rng.uniform(-bound, bound, size=shape).astype(self.dtype)
            for name, shape in shapes.items()
        }
        self._dropout_rng = rng  # continues the seeded stream: masks are reproducible too
        self.grads = {name: np.zeros_like(p) for name, p in self._params.items()}
        self.training = True
        self._cache = None
        self._zero_state = None

    # ---- options ------------------------------------------------------------------------------
    # What shapes the parameters (or their initialisation) is fixed; every other option may be
    # assigned later and is checked exactly as the constructor checks it.

    input_size = _read_only("input_size", "the parameters' shapes depend on it")
    hidden_size = _read_only("hidden_size", "the parameters' shapes depend on it")
    num_layers = _read_only("num_layers", "the parameters depend on it")
    bidirectional = _read_only("bidirectional", "the reverse direction has its own parameters")
    bias = _read_only("bias", "the bias parameters exist or not")
    dtype = _read_only("dtype", "the parameters are stored in it")
    seed = _read_only("seed", "it drew the initial parameters")

    @property
    def nonlinearity(self):
        """``"tanh"`` or ``"relu"``."""
        return self._nonlinearity

    @nonlinearity.setter
    def nonlinearity(self, value):
        self._nonlinearity = check_nonlinearity(value)

    @property
    def batch_first(self):
        """Sequences as (B, T, ...) instead of (T, B, ...)."""
        return self._batch_first

    @batch_first.setter
    def batch_first(self, value):
        self._batch_first = check_bool("batch_first", value)

    @property
    def dropout(self):
        """Drop probability in [0, 1] between stacked layers, in training mode."""
        return self._dropout

    @dropout.setter
    def dropout(self, value):
        self._dropout = self._checked_dropout(value)

    def _checked_dropout(self, value):
        """dropout checked; with one layer, torch's warning that it has nothing to act on
        (pointed at the user's line: the constructor and the setter call this alike)."""
        value = check_probability("dropout", value)
        if value > 0.0 and self.num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={value} and "
                f"num_layers={self.num_layers}",
                UserWarning,
                stacklevel=3,
            )
        return value

    @property
    def residual(self):
        """Skip connections around the layers k > 0."""
        return self._residual

    @residual.setter
    def residual(self, value):
        value = check_bool("residual", value)
        if value and self.num_layers < 2:
            raise ValueError(
                "residual: skip connections join the layers k > 0 of a stack to their inputs; "
                f"num_layers={self.num_layers} has none (use num_layers >= 2)"
            )
        self._residual = value

    @property
    def merge_mode(self):
        """How the last layer's two directions are combined: "concat", "sum", "mul", "ave",
        or None (Keras's: the two returned separately, [forward, backward])."""
        return self._merge_mode

    @merge_mode.setter
    def merge_mode(self, value):
        if not isinstance(value, (str, type(None))) or value not in MERGE_MODES:
            raise ValueError(f"merge_mode: expected one of {MERGE_MODES}, got {value!r}")
        if value != "concat" and not self.bidirectional:
            raise ValueError(
                f"merge_mode={value!r}: merges the two directions, needs bidirectional=True"
            )
        self._merge_mode = value

    @property
    def go_backwards(self):
        """Keras's: read the sequences in reverse, return the outputs in that order."""
        return self._go_backwards

    @go_backwards.setter
    def go_backwards(self, value):
        self._go_backwards = check_bool("go_backwards", value)

    @property
    def return_sequences(self):
        """Keras's: True, False, or None (with return_state None too: PyTorch's forms)."""
        return self._return_sequences

    @return_sequences.setter
    def return_sequences(self, value):
        self._return_sequences = check_optional_bool("return_sequences", value)

    @property
    def return_state(self):
        """Keras's: True, False, or None (with return_sequences None too: PyTorch's forms)."""
        return self._return_state

    @return_state.setter
    def return_state(self, value):
        self._return_state = check_optional_bool("return_state", value)

    @property
    def stateful(self):
        """Carry h_n from one call to the next as its h0."""
        return self._stateful

    @stateful.setter
    def stateful(self, value):
        value = check_bool("stateful", value)
        if value and any(d > 1 for d in getattr(self, "_dilations", ())):
            raise ValueError(_DILATED_STREAMING)
        if value != getattr(self, "_stateful", value):
            # a state carried before the change belongs to another way of running: forget it
            self._state = None
        self._stateful = value

    @property
    def alpha(self):
        """Leak rate in (0, 1], or a list of one per layer."""
        return self._alpha

    @alpha.setter
    def alpha(self, value):
        if isinstance(value, (list, tuple)):
            if len(value) != self.num_layers:
                raise ValueError(
                    f"alpha: expected a float or a list of num_layers={self.num_layers} floats, "
                    f"got a list of {len(value)}"
                )
            alpha = [check_alpha(a) for a in value]
            alphas = alpha
        else:
            alpha = check_alpha(value)
            alphas = [alpha] * self.num_layers
        self._alpha, self._alphas = alpha, alphas

    @property
    def input_dropout(self):
        """Keras's ``dropout``: the probability of dropping each input unit, one mask per
        sequence shared by every step (variational), each layer of the stack its own; in
        training mode only."""
        return self._input_dropout

    @input_dropout.setter
    def input_dropout(self, value):
        self._input_dropout = check_probability("input_dropout", value)

    @property
    def recurrent_dropout(self):
        """Keras's ``recurrent_dropout``: drops units of h_{t-1} in the recurrent product
        ``W_hh (h_{t-1} * m)``, one mask per sequence shared by every step, inside the
        kernels; in training mode only."""
        return self._recurrent_dropout

    @recurrent_dropout.setter
    def recurrent_dropout(self, value):
        self._recurrent_dropout = check_probability("recurrent_dropout", value)

    @property
    def zero_output_for_mask(self):
        """Keras's: the output of a step a ``mask`` skips is zeros (True) or the previous
        output (False). None: Keras's choice, False but for a bidirectional layer returning
        sequences (Keras's Bidirectional sets it)."""
        return self._zero_output_for_mask

    @zero_output_for_mask.setter
    def zero_output_for_mask(self, value):
        self._zero_output_for_mask = check_optional_bool("zero_output_for_mask", value)

    @property
    def dilation(self):
        """Temporal skip of the recurrence: ``h_t`` reads ``h_{t-d}`` (d interleaved sequences,
        run as one batch on the same kernels). An int, or a list of one per layer (for
        example ``[1, 2, 4, 8]``, a stack over multiple time scales)."""
        return self._dilation

    @dilation.setter
    def dilation(self, value):
        values = list(value) if isinstance(value, (list, tuple)) else [value] * self.num_layers
        if len(values) != self.num_layers:
            raise ValueError(
                f"dilation: expected an int or a list of num_layers={self.num_layers} ints, got "
                f"a list of {len(values)}"
            )
        for v in values:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"dilation: expected a positive int, got {type(v).__name__} {v!r}")
            if v < 1:
                raise ValueError(f"dilation: expected a positive int, got {v}")
        if any(v > 1 for v in values) and getattr(self, "_stateful", False):
            raise ValueError(_DILATED_STREAMING)
        self._dilation = [int(v) for v in value] if isinstance(value, (list, tuple)) else int(value)
        self._dilations = tuple(int(v) for v in values)

    def _zero_output(self, o):
        if o.zero_output_for_mask is not None:
            return o.zero_output_for_mask
        sequences = not o.keras or bool(o.return_sequences)
        return self.bidirectional and sequences

    def _options(self):
        """The options as they are now, for one forward and its backward."""
        return _Options(
            self.nonlinearity,
            list(self._alphas),
            self.batch_first,
            self.go_backwards,
            self.residual,
            self.merge_mode,
            self._keras(),
            self.return_sequences,
            self.return_state,
            self.zero_output_for_mask,
        )

    @property
    def num_directions(self):
        return 2 if self.bidirectional else 1

    @property
    def output_size(self):
        """Width of the output sequence: H, or 2H for concatenated directions."""
        concat = self.bidirectional and self.merge_mode == "concat"
        return self.hidden_size * (2 if concat else 1)

    @property
    def state(self):
        """The state carried to the next call of a stateful layer (layers*dirs, B, H), or None."""
        return None if self._state is None else self._state.copy()

    def reset_state(self):
        """Forget the carried state of a stateful layer: the next call starts from zeros."""
        self._state = None

    def _keras(self):
        return self.return_sequences is not None or self.return_state is not None

    # ---- forward and backward ---------------------------------------------------------------

    def __call__(self, x, h0=None, lengths=None, mask=None, *, embedding=None):
        return self.forward(x, h0, lengths, mask, embedding=embedding)

    def forward(self, x, h0=None, lengths=None, mask=None, *, embedding=None):
        """Run the layer over a padded batch, or over one unbatched sequence.

        Parameters
        ----------
        x : array_like, (T, B, input_size), or (B, T, input_size) when batch_first
            Or (T, input_size): one unbatched sequence (torch's), whatever ``batch_first``;
            h0 is then (num_layers*dirs, H) and the outputs have no batch axis either.
        h0 : array_like, (num_layers*dirs, B, H), optional
            Zeros when omitted (or the carried state of a stateful layer).
        lengths : array_like of int, (B,), optional
            Each sequence's length in [0, T]; steps past it output zeros and h_n is the state
            at its own last step. Not with unbatched input (it has no padding).
        mask : array_like of bool, (B, T), optional
            Keras-style prefix mask, the same as ``lengths = mask.sum(1)``.
        embedding : Embedding, optional
            Token input: x holds integer ids (T, B) (or (B, T); (T,) unbatched) and the call
            is ``layer(embedding(x))`` fused into the kernels (as ``Sequential`` does for an
            Embedding followed by an RNN): the first layer projects the table once and
            gathers its rows, and its backward sums the deltas per id, so neither the
            embedded sequence nor its gradient is built. Fewer FLOPs when the vocabulary is
            smaller than T * B. In training mode ``backward`` adds the table's gradient into
            ``embedding.grads["weight"]`` and returns None for dx.

        Returns
        -------
        ``(y, h_n)`` (PyTorch) with y (T, B, out) (or (B, T, out)) and h_n
        (num_layers*dirs, B, H); with ``return_sequences`` / ``return_state`` set, Keras's
        forms (see the class). With ``merge_mode=None`` the output is the list
        ``[forward, backward]`` of the two directions' outputs (Keras's Bidirectional), and
        Keras's form with ``return_state`` is ``[forward, backward, h_n]``. In training mode
        the inputs and outputs are kept for one backward, and the output is returned
        read-only.

        Raises
        ------
        TypeError
            Non-float input, a float dtype other than the layer's, non-integer lengths.
        ValueError
            Shapes that do not fit, lengths out of range, a mask that is not a prefix mask,
            lengths and mask both given, lengths or a mask with unbatched input.
        """
        o = self._options()
        x_user = x
        x, table, unbatched = self._sequence_input(x, embedding, o.batch_first)
        steps, batch = x.shape[0], x.shape[1]
        if unbatched and (lengths is not None or mask is not None):
            raise ValueError(
                f"{'lengths' if lengths is not None else 'mask'}: unbatched input (one "
                "sequence, no batch axis) has no padding to describe; give x a batch axis of "
                "one (x[:, None], or x[None] when batch_first) with lengths of shape (1,)"
            )
        lengths, step_mask = self._mask_arg(lengths, mask, steps, batch, o)
        h0, h0_user = self._initial_state(h0, batch, unbatched)
        training = self.training
        if table is not None and training and self.input_dropout > 0.0:
            raise ValueError(
                "embedding: input_dropout drops units of the embedded sequence, which token "
                "input never builds; call layer(embedding(ids)) instead (Sequential does so "
                "for such a layer)"
            )
        reorder = _BatchOrder(lengths)
        # go_backwards reverses the caller's batch (its order); the reverse direction of a
        # bidirectional layer runs on the sorted batch (in the stack runner).
        rev = _Reverser(lengths, steps, batch) if o.go_backwards else None
        if o.go_backwards:
            x, step_mask = rev(x), rev(step_mask)
        # From here to the end of the stack the batch runs longest first.
        x, h0 = reorder.sort(x, 1), reorder.sort(h0, 1)
        step_mask = reorder.sort(step_mask, 1)
        run_lengths = reorder.lengths
        if training:
            # backward reads the inputs: keep copies of the caller's arrays, so a later
            # in-place change cannot silently alter the gradients.
            if np.may_share_memory(x, x_user):
                x = x.copy()
            if h0 is not None and h0_user is not None and np.may_share_memory(h0, h0_user):
                h0 = h0.copy()
        run = Run(
            o.nonlinearity,
            o.alphas,
            o.residual,
            run_lengths,
            step_mask,
            self._zero_output(o),
            table,
            training,
            self._dilations,
        )
        out, h_n, stack_cache = stack_forward(self, x, h0, run)
        h_n = reorder.unsort(h_n, 1)

        if self.stateful:
            self._state = h_n.copy()

        last = o.keras and not o.return_sequences
        result, out, o_last = self._returned_output(out, last, reorder, rev, lengths, o)
        out_shape = result.shape
        if training:
            merge_src = (o_last if last else out) if o.merge_mode == "mul" else None
            tokens = None if table is None else (embedding, table)
            self._cache = (
                o,
                run,
                stack_cache,
                lengths,
                reorder,
                merge_src,
                out_shape,
                last,
                steps,
                batch,
                tokens,
                unbatched,
            )
            result = result.view()
            result.flags.writeable = False
        else:
            self._cache = None
        if unbatched:  # views: a training output stays read-only
            result = _without_axis(result, _output_batch_axis(o.batch_first, last))
            h_n = h_n[:, 0]
        return self._output_form(result, h_n, o)

    def _initial_state(self, h0, batch, unbatched):
        """``(h0, the caller's array)``: the given state checked (an unbatched one as a batch of
        one), or a stateful layer's carried state, or None for zeros."""
        h0_user = h0
        if h0 is None and self.stateful and self._state is not None:
            if self._state.shape[1] != batch:
                raise ValueError(
                    f"x: a stateful layer carries a state for a batch of {self._state.shape[1]}, "
                    f"got a batch of {batch} (call reset_state() to start over)"
                )
            h0 = h0_user = self._state  # step() hands this array out: copy it when training
        elif unbatched and h0 is not None:
            h0 = self._unbatched_state("h0", h0, self.num_layers * self.num_directions)
        return self._state_arg("h0", h0, batch), h0_user

    def _returned_output(self, out, last, reorder, rev, lengths, o):
        """``(result, out, o_last)`` from the stack's output sequence (processing order, the
        batch sorted): Keras's last output or the whole sequence, merged, in the caller's batch
        order and layout; ``out`` unsorted (the sequence) and ``o_last`` (the last output) are
        what the merge's gradient reads."""
        if last:
            o_last = reorder.unsort(self._last_of(out, reorder.lengths), 0)
            return self._merge(o_last, o.merge_mode), out, o_last
        out = reorder.unsort(out, 1)  # the caller's batch order from here on
        result = self._merge(out, o.merge_mode)
        if o.go_backwards and lengths is not None:
            # Keras order: the reversed valid steps, after the padded ones (zeros)
            result = np.ascontiguousarray(rev(result)[::-1])
        if o.batch_first:
            result = result.swapaxes(0, 1)
        return result, out, None

    def _output_form(self, result, h_n, o):
        """What a call returns: PyTorch's ``(y, h_n)`` or Keras's forms, with the two
        directions' outputs as ``[forward, backward]`` for merge_mode=None (Keras flattens
        the states after them: ``[forward, backward, h_n]``)."""
        if o.merge_mode is None:
            H = self.hidden_size
            result = [result[..., :H], result[..., H:]]
        if not o.keras:
            return result, h_n
        if not o.return_state:
            return result
        return [*result, h_n] if o.merge_mode is None else (result, h_n)

    def _sequence_input(self, x, embedding, batch_first):
        """The sequence as the layer loop runs it, time-major: ``(x (T, B, D) or token ids
        (T, B), the embedding table or None, unbatched)``. An unbatched sequence (T, D) (ids
        (T,)) becomes a batch of one; it has no batch axis for batch_first to move."""
        if embedding is None:
            table = None
            x = as_float_array("x", x, self.dtype)
            layout = "(B, T, D)" if batch_first else "(T, B, D)"
            if x.ndim not in (2, 3):
                raise ValueError(
                    f"x: expected 3 dimensions {layout}, or 2 (T, D) for one "
                    f"unbatched sequence, got shape {x.shape}"
                )
            if x.shape[-1] != self.input_size:
                raise ValueError(
                    f"x: expected last dimension input_size={self.input_size} in {layout}, "
                    f"got shape {x.shape}"
                )
            unbatched = x.ndim == 2
        else:  # x: token ids, which every reordering below moves like the sequence they name
            x, table = self._token_input(x, embedding, batch_first)
            unbatched = x.ndim == 1
        if unbatched:
            return x[:, None], table, True
        if batch_first:
            x = np.ascontiguousarray(x.swapaxes(0, 1))
        return x, table, False

    def _unbatched_state(self, name, value, rows):
        """A state (rows, H) of one unbatched sequence as a batch of one (rows, 1, H). As
        torch: an unbatched input takes unbatched states, a batched one batched states."""
        arr = as_float_array(name, value, self.dtype)
        expected = (rows, self.hidden_size)
        if arr.shape != expected:
            raise ValueError(
                f"{name}: with unbatched input (no batch axis) expected shape "
                f"(num_layers*dirs, H) = {expected}, got shape {arr.shape}"
            )
        return arr[:, None]

    def _last_of(self, out, lengths):
        """Keras's last output of each direction (B, dirs*H): the forward direction at each
        sequence's own last step, the reverse direction at its first (where it ends); zeros
        for an empty sequence."""
        H = self.hidden_size
        steps, batch = out.shape[0], out.shape[1]
        if steps == 0:  # every sequence is empty
            return np.zeros((batch, out.shape[2]), dtype=self.dtype)
        if lengths is None:
            fwd = out[steps - 1, :, :H]
            rev = out[0, :, H:] if self.bidirectional else None
        else:
            ran = (lengths > 0)[:, None]
            fwd = np.where(ran, out[np.maximum(lengths - 1, 0), np.arange(batch), :H], 0)
            rev = np.where(ran, out[0, :, H:], 0) if self.bidirectional else None
        res = fwd if rev is None else np.concatenate([fwd, rev], axis=1)
        return np.ascontiguousarray(res, dtype=self.dtype)

    def _merge(self, o, merge_mode):
        """The two directions of the last layer (..., 2H) merged as ``merge_mode`` says;
        concatenated ones (and merge_mode=None's, split only when returned) pass as they are."""
        if not self.bidirectional or merge_mode in ("concat", None):
            return o
        H = self.hidden_size
        f, r = o[..., :H], o[..., H:]
        if merge_mode == "sum":
            return f + r
        if merge_mode == "mul":
            return f * r
        return (f + r) * 0.5

    def _unmerge(self, d, src, merge_mode):
        """Gradient of the merge: from d (..., out) to (..., dirs*H)."""
        if not self.bidirectional or merge_mode in ("concat", None):
            return d
        H = self.hidden_size
        if merge_mode == "sum":
            return np.concatenate([d, d], axis=-1)
        if merge_mode == "ave":
            half = d * 0.5
            return np.concatenate([half, half], axis=-1)
        return np.concatenate([d * src[..., H:], d * src[..., :H]], axis=-1)

    def backward(self, d_output, dh_n=None):
        """Gradients of one training forward.

        Parameters
        ----------
        d_output : array_like or None
            Gradient of the loss with respect to the output the call returned (the sequence y,
            or Keras's last output), shaped like it (without the batch axis for unbatched
            input); None for zeros. With merge_mode=None: ``[d_forward, d_backward]``, the
            gradients of the two outputs (either may be None, for zeros).
        dh_n : array_like, (num_layers*dirs, B, H), optional
            Gradient with respect to h_n ((num_layers*dirs, H) for unbatched input).

        Returns
        -------
        dx, dh0 : shaped like x and h0. The parameter gradients are added into
        ``self.grads``. Options assigned since the forward do not apply: the gradient is the
        forward's. A failed call changes nothing and keeps the forward for a retry.
        """
        if self._cache is None:
            raise RuntimeError(
                "backward: no training forward to differentiate; call the layer in training "
                "mode first (each forward allows one backward)"
            )
        (
            o,
            run,
            stack_cache,
            lengths,
            reorder,
            merge_src,
            out_shape,
            last,
            steps,
            batch,
            tokens,
            unbatched,
        ) = self._cache
        d_output = self._output_gradient(d_output, o, out_shape, last, unbatched)
        if unbatched and dh_n is not None:
            dh_n = self._unbatched_state("dh_n", dh_n, self.num_layers * self.num_directions)
        dh_n = self._state_arg("dh_n", dh_n, batch)

        # go_backwards reverses the caller's batch (its order), as in forward.
        rev = _Reverser(lengths, steps, batch) if o.go_backwards else None
        d_out, dh_n = self._top_gradient(
            d_output,
            reorder.sort(dh_n, 1),
            last,
            run,
            reorder,
            rev,
            lengths,
            merge_src,
            o,
            steps,
            batch,
        )
        d_out, dh0, new_grads = stack_backward(self, stack_cache, run, d_out, dh_n)
        dh0 = reorder.unsort(dh0, 1)
        if tokens is None:
            dx = reorder.unsort(d_out, 1)
            if o.go_backwards:
                dx = rev(dx)
            if unbatched:
                dx = np.ascontiguousarray(dx[:, 0])
            elif o.batch_first:
                dx = np.ascontiguousarray(dx.swapaxes(0, 1))
        for k, g in new_grads.items():
            self.grads[k] += g
        if tokens is not None:
            if tokens[0].padding_idx is not None:  # PyTorch's rule: the padding row is not trained
                d_out[tokens[0].padding_idx] = 0
            tokens[0].grads["weight"] += d_out
            dx = None  # ids have no gradient
        self._cache = None
        if unbatched:
            dh0 = np.ascontiguousarray(dh0[:, 0])
        return dx, dh0

    def _top_gradient(
        self, d_output, dh_n, last, run, reorder, rev, lengths, merge_src, o, steps, batch
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
            return reorder.sort(self._unmerge(d, merge_src, o.merge_mode), 1), dh_n
        d_last = reorder.sort(self._unmerge(d_output, merge_src, o.merge_mode), 0)
        if steps == 0:
            return None, dh_n  # every sequence is empty: its (zero) last output depends on nothing
        if (o.residual and self.num_layers > 1) or run.step_mask is not None:
            # the last output is the output sequence's last step (with a mask it can differ
            # from h_n: zeros for a sequence without a kept step)
            return self._last_gradient_sequence(d_last, run.lengths, steps, batch), dh_n
        # Each direction's last output is its state at the sequence's end, h_n: the gradient
        # enters there, and no (T, B, H) gradient of zeros is built.
        return None, self._add_last_gradient_to_state(d_last, run.lengths, dh_n, batch)

    def _output_gradient(self, d_output, o, out_shape, last, unbatched):
        """The gradient of what the forward returned, checked, as one array shaped like the
        forward's batched output ``out_shape`` (directions concatenated); None stays None."""
        name = "dy" if not o.keras else "d_output"
        axis = _output_batch_axis(o.batch_first, last) if unbatched else None
        shown = out_shape if axis is None else out_shape[:axis] + out_shape[axis + 1 :]
        if o.merge_mode is None:
            d_output = self._join_directions(name, d_output, shown)
        if d_output is None:
            return None
        d_output = np.asarray(d_output)
        got = d_output.shape
        if got != shown:
            # dtype first: a float64 gradient for a float32 layer gets the message with the fix
            as_float_array(name, d_output, self.dtype)
            raise ValueError(f"{name}: expected shape {shown} (like the output), got shape {got}")
        if axis is not None:
            d_output = np.expand_dims(d_output, axis)
        # Batch-first sequences are converted through their time-major view: a gradient that
        # is time-major in memory already (one computed from our own output, the usual case)
        # then goes to the kernels without a copy.
        swap = o.batch_first and not last
        d_output = as_float_array(name, d_output.swapaxes(0, 1) if swap else d_output, self.dtype)
        return d_output.swapaxes(0, 1) if swap else d_output

    def _join_directions(self, name, d_output, shape):
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
        part = shape[:-1] + (self.hidden_size,)
        parts = []
        for i, d in enumerate(d_output):
            if d is None:
                parts.append(np.zeros(part, dtype=self.dtype))
                continue
            arr = as_float_array(f"{name}[{i}]", d, self.dtype)
            if arr.shape != part:
                raise ValueError(
                    f"{name}[{i}]: expected shape {part} (like the "
                    f"{('forward', 'backward')[i]} output), got shape {arr.shape}"
                )
            parts.append(arr)
        return np.concatenate(parts, axis=-1)

    def _token_input(self, ids, embedding, batch_first):
        """Checked token ids (a private int64 copy), (T, B) or (B, T), or (T,) unbatched, and
        the table they index (a copy in training mode: backward's dW_ih reads the table as the
        forward saw it)."""
        from .embedding import Embedding

        if not isinstance(embedding, Embedding):
            raise TypeError(f"embedding: expected an Embedding, got {type(embedding).__name__}")
        if embedding.embedding_dim != self.input_size:
            raise ValueError(
                f"embedding: expected embedding_dim = input_size = {self.input_size}, got "
                f"{embedding.embedding_dim}"
            )
        if embedding.dtype != self.dtype:
            raise TypeError(
                f"embedding: expected dtype {self.dtype} (the layer's), got {embedding.dtype}"
            )
        ids = embedding.check_ids(ids)
        if ids.ndim not in (1, 2):
            layout = "(B, T)" if batch_first else "(T, B)"
            raise ValueError(
                f"x: expected token ids {layout} (or (T,) unbatched) with "
                f"embedding, got shape {ids.shape}"
            )
        table = embedding.weight if not self.training else embedding.weight.copy()
        return np.array(ids, dtype=np.int64), table

    def _last_gradient_sequence(self, d_last, lengths, steps, batch):
        """The gradient of Keras's last output (B, dirs*H) as one of the whole output sequence
        (T, B, dirs*H): zero but at each sequence's last step (the reverse direction: its first)."""
        H = self.hidden_size
        d_out = np.zeros((steps, batch, d_last.shape[1]), dtype=self.dtype)
        ran = np.arange(batch) if lengths is None else np.nonzero(lengths > 0)[0]
        ends = steps - 1 if lengths is None else lengths[ran] - 1
        d_out[ends, ran, :H] = d_last[ran, :H]
        if self.bidirectional:
            d_out[0, ran, H:] = d_last[ran, H:]
        return d_out

    def _add_last_gradient_to_state(self, d_last, lengths, dh_n, batch):
        """dh_n (num_layers*dirs, B, H) plus the gradient of Keras's last output, which is the
        top layer's h_n of each direction (zero for an empty sequence, whose h_n is h0)."""
        dirs, H = self.num_directions, self.hidden_size
        total = (
            np.zeros((self.num_layers * dirs, batch, H), dtype=self.dtype)
            if dh_n is None
            else dh_n.copy()
        )  # never the caller's array
        extra = d_last.reshape(batch, dirs, H).swapaxes(0, 1)
        if lengths is not None:
            extra = extra * (lengths > 0)[None, :, None]
        total[(self.num_layers - 1) * dirs :] += extra
        return total

    def _mask_arg(self, lengths, mask, steps, batch, o):
        """``(lengths, step_mask)`` of a call: the lengths checked, or Keras's (B, T) mask as a
        time-major step mask (T, B). A prefix mask whose skipped steps output zeros is the same
        as its lengths, and runs as them: the kernels then leave finished rows out."""
        if mask is None:
            return check_lengths(lengths, steps, batch), None
        if lengths is not None:
            raise ValueError("lengths, mask: give one of them, not both")
        m = np.asarray(mask)
        if m.dtype.kind not in "biu":
            raise TypeError(f"mask: expected a boolean (B, T) array, got dtype {m.dtype}")
        if m.shape != (batch, steps):
            raise ValueError(f"mask: expected shape (B, T) = {(batch, steps)}, got shape {m.shape}")
        if m.dtype.kind != "b":
            if m.size and (m.min() < 0 or m.max() > 1):
                raise ValueError("mask: expected boolean or 0/1 values")
            m = m.astype(bool)
        counts = m.sum(axis=1, dtype=np.int64)
        prefix = np.arange(steps)[None, :] < counts[:, None]
        if self._zero_output(o) and np.array_equal(m, prefix):
            return counts, None
        return None, np.ascontiguousarray(m.T)

    def _state_arg(self, name, value, batch):
        """A (num_layers*dirs, B, H) state argument, checked."""
        if value is None:
            return None
        arr = as_float_array(name, value, self.dtype)
        expected = (self.num_layers * self.num_directions, batch, self.hidden_size)
        if arr.shape != expected:
            hint = ""
            if arr.ndim == 2:
                hint = " (a state without a batch axis goes with unbatched input)"
            raise ValueError(
                f"{name}: expected shape (num_layers*dirs, B, H) = {expected}, got shape "
                f"{arr.shape}{hint}"
            )
        return arr

    # ---- streaming ----------------------------------------------------------------------------

    def step(self, x_t, h=None):
        """One time step for streaming inference: ``out_t, h_next = layer.step(x_t, h)``.

        x_t (B, input_size); h and h_next (num_layers, B, H) (zeros, or a stateful layer's
        carried state, when h is None); out_t (B, H) is the last layer's output (plus its input
        with ``residual``). Unbatched, as torch: x_t (input_size,) with h (num_layers, H) gives
        out_t (H,) and h_next (num_layers, H) (a stateful layer carries it as a batch of one).
        No dropout, nothing kept for backward; unidirectional layers only.
        A stateful layer carries h_next to its next call. The parameters are read live, with
        no per-call checks of them: only x_t and h are checked. out_t and h_next[-1] may be the
        same memory (copy before writing into either).
        """
        if any(d > 1 for d in self._dilations):
            raise ValueError(_DILATED_STREAMING)
        if self._bidirectional:  # the private attributes: no property calls on this hot path
            raise ValueError(
                "step: a bidirectional layer needs the whole sequence (its reverse direction "
                "starts at the end); use a forward call"
            )
        if (x_t.ndim if type(x_t) is np.ndarray else np.ndim(x_t)) == 1:
            return self._step_unbatched(x_t, h)
        return self._step_batched(x_t, h)

    def _step_unbatched(self, x_t, h):
        """step() of one sequence without a batch axis, run as a batch of one."""
        x_t = as_float_array("x_t", x_t, self.dtype)[None]
        if h is not None:
            h = self._unbatched_state("h", h, self.num_layers)
        out, h_next = self._step_batched(x_t, h)
        return out[0], h_next[:, 0]

    def _step_batched(self, x_t, h):
        """step() of a batch: x_t (B, input_size), h (num_layers, B, H) or None. The streaming
        hot path: it reads the options' private attributes (no property calls)."""
        if h is None and self._stateful:
            h = self._state
        if h is None:
            shape = x_t.shape if type(x_t) is np.ndarray else np.shape(x_t)
            if len(shape) != 2:
                shape = as_float_array("x_t", x_t, self._dtype).shape  # TypeError if not float
                raise ValueError(
                    f"x_t: expected shape (B, input_size) = (B, {self.input_size}), or "
                    f"(input_size,) unbatched, got shape {shape}"
                )
            batch = shape[0]
            zeros = self._zero_state
            if zeros is None or zeros.shape[1] != batch:
                # never handed out, so never written: reused across calls
                zeros = self._zero_state = np.zeros(
                    (self._num_layers, batch, self._hidden_size), dtype=self._dtype
                )
            h = zeros
        else:
            if type(h) is not np.ndarray or h.dtype is not self._dtype:
                h = as_float_array("h", h, self._dtype)
            if h.ndim != 3 or h.shape[0] != self._num_layers:
                hint = ""
                if h.ndim == 2:
                    hint = " (a state without a batch axis goes with x_t (input_size,))"
                raise ValueError(
                    f"h: expected shape (num_layers*dirs, B, H) = "
                    f"({self._num_layers}, B, {self._hidden_size}), got shape {h.shape}{hint}"
                )
        p = self._params
        step = functional.rnn_step
        if self._num_layers == 1:  # the streaming hot path: one kernel call, no Python loop
            n_ih, n_hh, n_bi, n_bh = self._names[0]
            h1 = step(
                x_t,
                h[0],
                p[n_ih],
                p[n_hh],
                p[n_bi] if n_bi else None,
                p[n_bh] if n_bh else None,
                self._nonlinearity,
                self._alphas[0],
            )
            h_next = h1[None]
            if self._stateful:
                self._state = h_next
            return h1, h_next
        states = []
        inp = x_t
        for layer, (n_ih, n_hh, n_bi, n_bh) in enumerate(self._names):
            h_l = step(
                inp,
                h[layer],
                p[n_ih],
                p[n_hh],
                p[n_bi] if n_bi else None,
                p[n_bh] if n_bh else None,
                self._nonlinearity,
                self._alphas[layer],
            )
            states.append(h_l)
            inp = h_l + inp if (self._residual and layer > 0) else h_l
        h_next = np.stack(states)
        if self._stateful:
            self._state = h_next
        return inp, h_next

    # ---- parameters -------------------------------------------------------------------------

    def load_state_dict(self, state_dict):
        """Load parameters from a mapping with PyTorch's keys (NumPy arrays, torch tensors or
        anything ``np.asarray`` takes). Checks every key and shape before changing anything."""
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"state_dict: expected a mapping, got {type(state_dict).__name__}")
        missing = [k for k in self._params if k not in state_dict]
        extra = [k for k in state_dict if k not in self._params]
        if missing:
            raise ValueError(f"state_dict: missing key(s) {missing}")
        if extra:
            raise ValueError(f"state_dict: unexpected key(s) {extra}")
        loaded = {}
        for name, current in self._params.items():
            value = state_dict[name]
            if hasattr(value, "detach"):  # a torch tensor: no autograd, on the CPU
                value = value.detach().cpu().numpy()
            arr = np.asarray(value)
            if arr.dtype.kind not in "fiu":
                raise TypeError(f"{name}: expected a real numeric array, got dtype {arr.dtype}")
            if arr.shape != current.shape:
                raise ValueError(f"{name}: expected shape {current.shape}, got shape {arr.shape}")
            loaded[name] = np.array(arr, dtype=self.dtype)
        for name, arr in loaded.items():
            self._params[name][...] = arr

    def get_config(self):
        """The constructor arguments: ``RNN(**layer.get_config())`` builds the same architecture
        (fresh parameters; load a state_dict for the values). JSON-serialisable."""
        return {
            "input_size": self.input_size,
            "hidden_size": self.hidden_size,
            "num_layers": self.num_layers,
            "nonlinearity": self.nonlinearity,
            "bias": self.bias,
            "batch_first": self.batch_first,
            "dropout": self.dropout,
            "bidirectional": self.bidirectional,
            "dtype": self.dtype.name,
            "seed": self.seed if self.seed is None else int(self.seed),
            "residual": self.residual,
            "merge_mode": self.merge_mode,
            "go_backwards": self.go_backwards,
            "return_sequences": self.return_sequences,
            "return_state": self.return_state,
            "stateful": self.stateful,
            "alpha": list(self.alpha) if isinstance(self.alpha, list) else self.alpha,
            "input_dropout": self.input_dropout,
            "recurrent_dropout": self.recurrent_dropout,
            "zero_output_for_mask": self.zero_output_for_mask,
            "dilation": self.dilation,
        }

    # ---- description --------------------------------------------------------------------------

    def keras_param_count(self):
        """Parameters in Keras's layout (one bias vector per direction), as its summary counts."""
        from ..io import persistence  # nn does not import io at load time

        return persistence.keras_param_count(self)

    def num_parameters(self):
        return sum(p.size for p in self._params.values())

    def summary(self):
        """Print (and return) a Keras-style table: one row per layer, output shapes and parameter
        counts in Keras's layout (one bias), plus the PyTorch-layout total (two biases)."""
        from ..io import persistence

        text = persistence.summary_text(self)
        print(text)
        return text

    # ---- interop and persistence ---------------------------------------------------------------

    @classmethod
    def from_torch(cls, module):
        """A layer with the configuration and weights of a ``torch.nn.RNN``."""
        from ..io import interop

        return interop.from_torch(module, cls=cls)

    def to_torch(self):
        """A ``torch.nn.RNN`` with this layer's configuration and weights (torch imported here)."""
        from ..io import interop

        return interop.to_torch(self)

    def save(self, path):
        """Write configuration and parameters to a .npz file (no pickle); ``rnnfast.load`` reads it."""
        from ..io import persistence

        persistence.save(self, path)

    def __repr__(self):
        """Sizes, every option that differs from the constructor's default, and the dtype:
        two layers that compute differently never look the same."""
        shown = [
            f"{name}={getattr(self, name)!r}"
            for name, default in _OPTION_DEFAULTS.items()
            if getattr(self, name) != default
        ]
        return (
            f"RNN({', '.join([str(self.input_size), str(self.hidden_size), *shown])}, "
            f"dtype={self.dtype.name})"
        )


# The options repr compares with their defaults, read from the constructor: one source.
_OPTION_DEFAULTS = {
    name: param.default
    for name, param in inspect.signature(RNN.__init__).parameters.items()
    if name not in ("self", "input_size", "hidden_size", "dtype", "seed")
}
