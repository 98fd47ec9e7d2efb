"""The RNN layer: stacked, bidirectional, variable-length composition over rnnfast.functional,
with its parameters, gradients and the training cache."""

from __future__ import annotations

import functools
import inspect
import types

import numpy as np

from ... import functional
from ..._parameters import load_checked
from ..._validation import (
    as_float_array,
    check_bool,
    check_bool_mask,
    check_int,
    check_keys,
    check_lengths,
    check_positive_int,
    layer_dtype,
)
from .._layer import Layer
from .._mixed_precision import step_products
from .._shapes import MAX_DILATION, constructor_arguments, flag, size
from ..masking import call_rnn
from . import rnn_forms, rnn_options, rnn_rings, rnn_streaming, rnn_summary, rnn_torch
from .cells import ELMAN
from .plain_calls import PlainCall, nothing_around_cells, plain_backward_call, plain_forward_call
from .rnn_forms import output_batch_axis, without_axis
from .rnn_options import FLAG, OPTIONAL_FLAG, PROBABILITY, fixed, option
from .rnn_rings import map_state
from .rnn_streaming import declined, stepper_of
from .stack import BatchOrder as _BatchOrder
from .stack import Reverser as _Reverser
from .stack import Run, float_direction_kernel, stack_backward, stack_forward

__all__ = ["RNN", "RecurrentLayer"]

_ndarray = np.ndarray  # one global lookup on the one-step call's path


def is_embedding(layer):
    """Whether ``layer`` is what token input reads (an Embedding, or its quantized copy): a
    table ``weight`` looked up by the ids ``check_ids`` accepts, ``padding_idx`` untrained."""
    return all(hasattr(layer, a) for a in ("check_ids", "weight", "embedding_dim", "padding_idx"))


def _arrays(value):
    """The arrays of a state argument: itself, or those of its (nested) lists and tuples (a
    dilated layer's rings; the LSTM's pair (h, c), each part a state or a list of rings)."""
    if isinstance(value, (list, tuple)):
        return [a for part in value for a in _arrays(part)]
    return [] if value is None else [value]


class RecurrentLayer(Layer):
    """The recurrent layer machinery shared by ``RNN``, ``GRU`` and ``LSTM``: API forms, batch
    order, reversal, lengths, stateful layers, token input, the stack runner (``nn.recurrent.stack``),
    its gradients, description and padding. What differs between the cells it asks the
    class's ``cell`` (``nn.recurrent.cells``); a subclass adds its constructor, configuration and
    interop."""

    # True where the caller guards the inputs a training forward keeps against in-place changes
    # itself (rnnfast.torch: torch's version check of saved tensors), so they are kept as given
    # instead of copied. A class default, so that layers pickled before it existed load.
    _inputs_guarded = False
    # calls with nothing around the cells run on the float kernels' plain stack
    # (nn.recurrent.plain_calls); a layer with kernels of its own (quantized) says False
    _plain_stack = True
    # step()'s hot path, bound at the first step (nn.recurrent.rnn_streaming.bind_step); None: not bound yet. A class
    # default for the same reason; the setters of the options it reads set it back to None.
    _stepper = None
    # a Module names a call's positional arguments after x so, and routes dh0 to h0
    call_arguments = ("h0", "lengths", "mask")
    cell = ELMAN

    # The constructor's declaration (nn.recurrent.rnn_options.signature, one for every cell): the cell's
    # positional options after num_layers (torch's), its keyword options, the options it
    # accepts and ignores, and those of them fixed at construction (``_init_cell`` checks
    # them; the others go through their setters).
    _torch_options = _cell_options_declared = _ignored_options = _fixed_options = ()

    # ---- options --------------------------------------------------------------------------------
    # What shapes the parameters (or their initialisation) is fixed; every other option may be
    # assigned later and is checked exactly as the constructor checks it (nn.recurrent.rnn_options).

    input_size = fixed("input_size", "the parameters' shapes depend on it")
    hidden_size = fixed("hidden_size", "the parameters' shapes depend on it")
    num_layers = fixed("num_layers", "the parameters depend on it")
    bidirectional = fixed("bidirectional", "the reverse direction has its own parameters")
    bias = fixed("bias", "the bias parameters exist or not")
    dtype = fixed("dtype", "the parameters are stored in it")
    seed = fixed("seed", "it drew the initial parameters")
    input_to_all = fixed("input_to_all", "the input width of the layers k > 0 depends on it")

    nonlinearity = rnn_options.NONLINEARITY
    batch_first = rnn_options.BATCH_FIRST
    precision = rnn_options.PRECISION
    dropout = option(
        "dropout",
        rnn_options.check_dropout,
        "Drop probability in [0, 1] between stacked layers, in training mode.",
    )
    residual = option(
        "residual", rnn_options.check_residual, "Skip connections around the layers k > 0."
    )
    all_to_output = option(
        "all_to_output",
        rnn_options.check_all_to_output,
        """Dense skips to the output: the stack's output is every layer's output sequence
        concatenated on the feature axis, layer 0 first (num_layers * dirs * R wide).""",
    )
    merge_mode = option(
        "merge_mode",
        rnn_options.check_merge_mode,
        """How the last layer's two directions are combined: "concat", "sum", "mul", "ave",
        or None (Keras's: the two returned separately, [forward, backward]).""",
    )
    go_backwards = option(
        "go_backwards",
        FLAG,
        "Keras's: read the sequences in reverse, return the outputs in that order.",
    )
    return_sequences = option(
        "return_sequences",
        OPTIONAL_FLAG,
        "Keras's: True, False, or None (with return_state None too: PyTorch's forms).",
    )
    return_state = option(
        "return_state",
        OPTIONAL_FLAG,
        "Keras's: True, False, or None (with return_sequences None too: PyTorch's forms).",
    )
    stateful = option(
        "stateful", rnn_options.check_stateful, "Carry h_n from one call to the next as its h0."
    )
    alpha = option(
        "alpha", rnn_options.check_alpha, "Leak rate in (0, 1], or a list of one per layer."
    )
    input_dropout = option(
        "input_dropout",
        PROBABILITY,
        """Keras's ``dropout``: the probability of dropping each input unit, one mask per
        sequence shared by every step (variational), each layer of the stack its own; in
        training mode only.""",
    )
    recurrent_dropout = option(
        "recurrent_dropout",
        PROBABILITY,
        """Keras's ``recurrent_dropout``: drops units of h_{t-1} in the recurrent product
        ``W_hh (h_{t-1} * m)``, one mask per sequence shared by every step, inside the
        kernels; in training mode only.""",
    )
    zero_output_for_mask = option(
        "zero_output_for_mask",
        OPTIONAL_FLAG,
        """Keras's: the output of a step a ``mask`` skips is zeros (True) or the previous
        output (False). None: Keras's choice, False but for a bidirectional layer returning
        sequences (Keras's Bidirectional sets it).""",
    )
    dilation = option(
        "dilation",
        rnn_options.check_dilation,
        """Temporal skip of the recurrence: ``h_t`` reads ``h_{t-d}`` (d interleaved sequences,
        run as one batch on the same kernels). An int, or a list of one per layer (for
        example ``[1, 2, 4, 8]``, a stack over multiple time scales).""",
    )

    # class defaults: layers pickled (or copied) before the dense skips existed read False,
    # before mixed precision float32 (a quantized copy, which does not copy it, too)
    _input_to_all = False
    _all_to_output = False
    _precision = "float32"
    # every product of its forward, backward and step is a float32 kernel call (the layer
    # protocol's: bf16 products apply to all of them)
    kernel_products = True

    @property
    def num_directions(self):
        return 2 if self.bidirectional else 1

    @property
    def output_size(self):
        """Width of the output sequence: R (H, or an LSTM's proj_size), or 2R for
        concatenated directions; num_layers times that with ``all_to_output``."""
        concat = self.bidirectional and self.merge_mode == "concat"
        layers = self.num_layers if self._all_to_output else 1
        return self.cell.output_width(self) * (2 if concat else 1) * layers

    @property
    def state(self):
        """The state carried to the next call of a stateful layer (layers*dirs, B, H), or None;
        for a dilated layer, the list of its rings (d_k, B, H), one per layer and direction
        (``dilation``), which ``h0`` and ``step`` take back."""
        return self._state_output(map_state(np.copy, self._state))

    def reset_state(self):
        """Forget the carried state of a stateful layer: the next call starts from zeros."""
        self._state = None

    def _options(self):
        """The options as they are now, for one forward and its backward."""
        return rnn_options.ForwardOptions(
            self._nonlinearity,  # the Elman cell's (None for the gated cells)
            list(self._alphas),
            self.batch_first,
            self.go_backwards,
            self.residual,
            self.merge_mode,
            self._keras(),
            self.return_sequences,
            self.return_state,
            self.zero_output_for_mask,
            self._cell_options(),
            self._all_to_output,
            self._precision,
        )

    def _cell_options(self):
        """The keyword options of a gated cell's kernels (``nn.recurrent.cells``), None for the Elman
        cell (its nonlinearity and alphas travel apart)."""
        return None

    def _keras(self):
        return self.return_sequences is not None or self.return_state is not None

    def _zero_output(self, o):
        if o.zero_output_for_mask is not None:
            return o.zero_output_for_mask
        sequences = not o.keras or bool(o.return_sequences)
        return self.bidirectional and sequences

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "cell" in cls.__dict__:  # the cell registry's layer of its cell (nn.recurrent.cells)
            cls.cell.claim(cls, "layer_class")
        cls._constructor = rnn_options.signature(cls)
        # what help() and inspect show; a subclass with a constructor of its own shows that
        cls.__signature__ = None if "__init__" in cls.__dict__ else cls._constructor

    def __init__(self, *args, **kwargs):
        """See the class (``help(type(layer))``): the signature is the class's."""
        try:
            bound = self._constructor.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{type(self).__name__}(): {e}") from None
        bound.apply_defaults()
        a = bound.arguments
        self._init_cell(a)
        self._init_fixed(
            a["input_size"], a["hidden_size"], a["num_layers"], a["bias"], a["bidirectional"],
            a["dtype"], a["seed"],
        )  # fmt: skip
        self._input_to_all = rnn_options.check_input_to_all(self, "input_to_all", a["input_to_all"])
        self._dropout = rnn_options.check_dropout(self, "dropout", a["dropout"])
        # the other options through their setters: the same checks now and on assignment
        rnn_options.set_options(self, a)
        self._init_parameters(np.random.default_rng(a["seed"]))

    def _init_cell(self, arguments):
        """The cell's options fixed at construction (``_fixed_options``), checked first."""

    def _is_dilated(self):
        return rnn_rings.is_dilated(self)

    def _rings_input(self, name, value, batch, directions, unbatched=False):
        """A state argument in the ring form, checked, as the runner takes it (a list of rings
        (d_i, B, S)); None when ``value`` is not in the ring form (``nn.recurrent.rnn_rings``; the
        LSTM's pair of ring lists overrides this)."""
        return rnn_rings.rings_input(self, name, value, batch, directions, unbatched)

    @classmethod
    def parameter_shapes(cls, config):
        """``{name: shape}`` of a layer built from ``config``, from its cell's layout
        (``nn.recurrent.cells``), without building it (the layer protocol's; ``rnnfast.load`` checks a
        file's arrays with it first). Its dilation, which no parameter carries, is checked
        against its bound, ``MAX_DILATION``."""
        args = constructor_arguments(cls, config)
        shape = types.SimpleNamespace(
            input_size=size(args, "input_size"),
            hidden_size=size(args, "hidden_size"),
            num_layers=size(args, "num_layers"),
            proj_size=size(args, "proj_size", 0) if "proj_size" in args else 0,
            transition_layers=(
                size(args, "transition_layers") if "transition_layers" in args else 1
            ),
            bias=flag(args, "bias", True),
            bidirectional=flag(args, "bidirectional"),
            input_to_all=flag(args, "input_to_all"),
            peepholes=flag(args, "peepholes"),  # the LSTM's ONNX form (nn.recurrent.cells)
        )
        dilation = args.get("dilation", 1)
        if isinstance(dilation, (list, tuple)) and len(dilation) != shape.num_layers:
            raise ValueError(
                f"config['dilation']: expected an int or a list of num_layers="
                f"{shape.num_layers} ints, got a list of {len(dilation)}"
            )
        for d in dilation if isinstance(dilation, (list, tuple)) else [dilation]:
            check_int("config['dilation']", d, 1, MAX_DILATION)
        return dict(cls.cell.layout(shape)[1])

    def _init_fixed(self, input_size, hidden_size, num_layers, bias, bidirectional, dtype, seed):
        """The constructor's sizes and the options fixed at construction, checked; no carried
        state yet. The other options go through their setters (the checks of assignment)."""
        self._input_size = check_positive_int("input_size", input_size)
        self._hidden_size = check_positive_int("hidden_size", hidden_size)
        self._num_layers = check_positive_int("num_layers", num_layers)
        self._bias = check_bool("bias", bias)
        self._bidirectional = check_bool("bidirectional", bidirectional)
        self._dtype = layer_dtype(dtype)
        self._seed = seed
        self._state = None

    def _init_parameters(self, rng):
        """The parameters as the cell lays them out, PyTorch's initialisation from ``rng``."""
        self._names, shapes = self.cell.layout(self)  # per (layer, direction): l * dirs + d
        self._params = self.cell.initial_parameters(self, rng, shapes)
        self._dropout_rng = rng  # continues the seeded stream: masks are reproducible too
        self.grads = {name: np.zeros_like(p) for name, p in self._params.items()}
        self.training = True
        self._cache = None
        self._zero_state = None
        self._stepper = None

    # ---- forward and backward ---------------------------------------------------------------

    def __call__(self, x, h0=None, lengths=None, mask=None, *, embedding=None):
        # One step of a batch of one (x (1, 1, D)) in eval mode is the layer's bound step where
        # it has one (one undilated, unidirectional, stateless layer) and nothing surrounds
        # the cell: forward's general path (options, masks, order, the time loop's setup)
        # costs 20-30x the step at D = H = 64, and a decoder or a server calls the layer one
        # step at a time. Here, not in forward or a helper, to spare a call's frame: the Elman
        # step is short enough for one to matter.
        if (
            not self.training
            and lengths is None
            and mask is None
            and embedding is None
            and type(x) is _ndarray
            and len(shape := x.shape) == 3
            and shape[0] == 1
            and shape[1] == 1
            and (bound := self._stepper or stepper_of(self)) is not declined
            and nothing_around_cells(self)
        ):
            stepped = bound(x[0], h0)
            if stepped is not None:  # else not the hot path's arguments
                self._cache = None
                state = stepped[1]
                # y (1, 1, R) apart from h_n, as torch returns them
                return (state[0] if type(state) is tuple else state).copy(), state
        return self.forward(x, h0, lengths, mask, embedding=embedding)

    def forward(self, x, h0=None, lengths=None, mask=None, *, embedding=None):
        """Run the layer over a padded batch, or over one unbatched sequence.

        Parameters
        ----------
        x : array_like, (T, B, input_size), or (B, T, input_size) when batch_first
            Or (T, input_size): one unbatched sequence (torch's), whatever ``batch_first``;
            h0 is then (num_layers*dirs, H) and the outputs have no batch axis either.
        h0 : array_like, (num_layers*dirs, B, H), optional
            Zeros when omitted (or the carried state of a stateful layer). A dilated layer
            starts each of its d chains from it, or, given a list (or tuple) of one ring
            (d_k, B, H) per layer and direction (k the layer), chain j of layer k from
            ``h0[i][j]`` (h_{j-d_k}: the state a stateful layer carries); backward's dh0 is
            then such a list too. (The LSTM's h0 is the pair (h0, c0), each part one of
            these forms; see ``LSTM``.)
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
        if (
            type(x) is np.ndarray
            and x.ndim == 3
            and lengths is None
            and mask is None
            and embedding is None
        ):  # nothing around the cells: the plain stack (nn.recurrent.plain_calls)
            plain = plain_forward_call(self, x, h0)
            if plain is not None:
                return plain
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
        if table is not None and self._input_to_all:
            raise ValueError(
                "embedding: input_to_all feeds the embedded sequence to every layer, and token "
                "input never builds it; call layer(embedding(ids)) instead (Sequential does so "
                "for such a layer)"
            )
        if table is not None and training and self.input_dropout > 0.0:
            raise ValueError(
                "embedding: input_dropout drops units of the embedded sequence, which token "
                "input never builds; call layer(embedding(ids)) instead (Sequential does so "
                "for such a layer)"
            )
        x, h0, step_mask, reorder, rev = self._processing_order(
            x, x_user, h0, h0_user, lengths, step_mask, o, training
        )
        run_lengths = reorder.lengths
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
            rings=self.stateful and self._is_dilated(),
            cell_options=o.cell_options,
            input_to_all=self._input_to_all,
            all_to_output=o.all_to_output,
            precision=o.precision,
        )
        out, h_n, stack_cache, rings = stack_forward(self, x, h0, run)
        h_n = reorder.unsort(h_n, 1)

        if self.stateful:
            # a dilated layer carries its rings (its next steps read up to d states back)
            self._state = h_n.copy() if rings is None else [reorder.unsort(r, 1) for r in rings]

        last = o.keras and not o.return_sequences
        result, out, o_last = rnn_forms.returned_output(self, out, last, reorder, rev, lengths, o)
        out_shape = result.shape
        if training:
            merge_src = (o_last if last else out) if o.merge_mode == "mul" else None
            tokens = None if table is None else (embedding, table)
            self._cache = (o, run, stack_cache, lengths, reorder, merge_src, out_shape)
            self._cache += (last, steps, batch, tokens, unbatched)
            result = result.view()
            result.flags.writeable = False
        else:
            self._cache = None
        if unbatched:  # views: a training output stays read-only
            result = without_axis(result, output_batch_axis(o.batch_first, last))
            h_n = h_n[:, 0]
        return rnn_forms.output_form(self, result, self._state_output(h_n), o)

    def _processing_order(self, x, x_user, h0, h0_user, lengths, step_mask, o, training):
        """``(x, h0, step_mask, reorder, rev)`` in the order the stack runs: go_backwards's
        reversal (of the caller's batch, within its lengths), then the batch sorted longest
        first; in training, copies where the caller's arrays would otherwise be kept."""
        steps, batch = x.shape[0], x.shape[1]
        reorder = _BatchOrder(lengths)
        # the reverse direction of a bidirectional layer runs on the sorted batch (in the stack)
        rev = _Reverser(lengths, steps, batch) if o.go_backwards else None
        if o.go_backwards:
            x, step_mask = rev(x), rev(step_mask)
        x, h0 = reorder.sort(x, 1), map_state(lambda a: reorder.sort(a, 1), h0)
        step_mask = reorder.sort(step_mask, 1)
        if training and not self._inputs_guarded:
            # backward reads the inputs: keep copies of the caller's arrays, so a later
            # in-place change cannot silently alter the gradients.
            if np.may_share_memory(x, x_user):
                x = x.copy()
            if h0 is not None and h0_user is not None:
                users = _arrays(h0_user)
                h0 = map_state(
                    lambda a: a.copy() if any(np.may_share_memory(a, u) for u in users) else a,
                    h0,
                )
        return x, h0, step_mask, reorder, rev

    def _initial_state(self, h0, batch, unbatched):
        """``(h0, the caller's array)``: the given state checked (an unbatched one as a batch of
        one), or a stateful layer's carried state, or None for zeros. A dilated layer's rings
        (``_rings_input``: the ring form of the layer's cell) come as a list of them."""
        h0_user = h0
        if h0 is None and self.stateful and self._state is not None:
            carried = self._state[0] if isinstance(self._state, list) else self._state
            if carried.shape[1] != batch:
                raise ValueError(
                    f"x: a stateful layer carries a state for a batch of {carried.shape[1]}, "
                    f"got a batch of {batch} (call reset_state() to start over)"
                )
            h0 = h0_user = self._state  # step() hands this array out: copy it when training
            if isinstance(h0, list):  # rings, the layer's own: checked when they were made
                return h0, h0_user
            return self._state_arg("h0", h0, batch, self.cell.state_width(self)), h0_user
        rings = self._rings_input("h0", h0, batch, self.num_directions, unbatched)
        if rings is not None:
            return rings, h0_user
        return self._state_input("h0", h0, batch, unbatched), h0_user

    def _state_input(self, name, value, batch, unbatched):
        """A state argument (h0, dh_n) as the stack runner takes it, (num_layers*dirs, B, S),
        checked (an unbatched one as a batch of one), or None. The Elman and GRU cells' state is
        h itself; the LSTM's layer joins its (h, c) (``nn.recurrent.cells``)."""
        if unbatched and value is not None:
            value = self._unbatched_state(name, value, self.num_layers * self.num_directions)
        return self._state_arg(name, value, batch)

    def _state_output(self, state):
        """A joined state (h_n, dh0, the carried state) in the API's form: h itself, or the
        LSTM's (h, c)."""
        return state

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

    def _unbatched_state(self, name, value, rows, width=None):
        """A state (rows, H) of one unbatched sequence as a batch of one (rows, 1, H). As
        torch: an unbatched input takes unbatched states, a batched one batched states."""
        arr = as_float_array(name, value, self.dtype)
        expected = (rows, self.hidden_size if width is None else width)
        if arr.shape != expected:
            raise ValueError(
                f"{name}: with unbatched input (no batch axis) expected shape "
                f"(num_layers*dirs, H) = {expected}, got shape {arr.shape}"
            )
        return arr[:, None]

    def backward(self, d_output, dh_n=None, *, input_gradient=True):
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
        input_gradient : bool
            False: ``dx`` is not computed and is None (an input that needs no gradient, such
            as the data a first layer reads: its kernels skip the GEMM). The parameter
            gradients and ``dh0`` are the same; token input's embedding still gets its own.

        Returns
        -------
        dx, dh0 : shaped like x and h0. The parameter gradients are added into
        ``self.grads``. Options assigned since the forward do not apply: the gradient is the
        forward's. A failed call changes nothing and keeps the forward for a retry.
        """
        input_gradient = check_bool("input_gradient", input_gradient)
        if type(self._cache) is PlainCall:  # a forward on the plain stack
            return plain_backward_call(self, self._cache, d_output, dh_n, input_gradient)
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
        d_output = rnn_forms.output_gradient(self, d_output, o, out_shape, last, unbatched)
        dh_n = self._state_input("dh_n", dh_n, batch, unbatched)

        # go_backwards reverses the caller's batch (its order), as in forward.
        rev = _Reverser(lengths, steps, batch) if o.go_backwards else None
        d_out, dh_n = rnn_forms.top_gradient(
            self,
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
        d_out, dh0, new_grads = stack_backward(self, stack_cache, run, d_out, dh_n, input_gradient)
        dh0 = map_state(lambda a: reorder.unsort(a, 1), dh0)
        dx = None
        if tokens is None and d_out is not None:
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
            dh0 = map_state(lambda a: np.ascontiguousarray(a[:, 0]), dh0)
        return dx, self._state_output(dh0)

    def _token_input(self, ids, embedding, batch_first):
        """Checked token ids (a private int64 copy), (T, B) or (B, T), or (T,) unbatched, and
        the table they index (a copy in training mode: backward's dW_ih reads the table as the
        forward saw it)."""
        if not is_embedding(embedding):
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

    def _mask_arg(self, lengths, mask, steps, batch, o):
        """``(lengths, step_mask)`` of a call: the lengths checked, or Keras's (B, T) mask as a
        time-major step mask (T, B). A prefix mask whose skipped steps output zeros is the same
        as its lengths, and runs as them: the kernels then leave finished rows out."""
        if mask is None:
            return check_lengths(lengths, steps, batch), None
        if lengths is not None:
            raise ValueError("lengths, mask: give one of them, not both")
        m = check_bool_mask("mask", mask, (batch, steps), f"(B, T) = {(batch, steps)}")
        counts = m.sum(axis=1, dtype=np.int64)
        prefix = np.arange(steps)[None, :] < counts[:, None]
        if self._zero_output(o) and np.array_equal(m, prefix):
            return counts, None
        return None, np.ascontiguousarray(m.T)

    def _state_arg(self, name, value, batch, width=None):
        """A (num_layers*dirs, B, H) state argument, checked (``width`` instead of H)."""
        if value is None:
            return None
        arr = as_float_array(name, value, self.dtype)
        width = self.hidden_size if width is None else width
        expected = (self.num_layers * self.num_directions, batch, width)
        if arr.shape != expected:
            hint = ""
            if arr.ndim == 2:
                hint = " (a state without a batch axis goes with unbatched input)"
            raise ValueError(
                f"{name}: expected shape (num_layers*dirs, B, H) = {expected}, got shape "
                f"{arr.shape}{hint}"
            )
        return arr

    # ---- parameters -------------------------------------------------------------------------

    def load_state_dict(self, state_dict):
        """Load parameters from a mapping with PyTorch's keys (NumPy arrays, torch tensors or
        anything ``np.asarray`` takes). Checks every key and shape before changing anything."""
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"state_dict: expected a mapping, got {type(state_dict).__name__}")
        check_keys("state_dict", state_dict, self._params)
        load_checked(self._params, state_dict)

    # ---- description --------------------------------------------------------------------------

    def keras_param_count(self):
        """Parameters in Keras's layout (one bias vector per direction), as its summary counts."""
        return rnn_summary.keras_param_count(self)

    def output_shape(self, input_shape):
        """The output's shape for ``input_shape`` (batch first): the last layer's merged width,
        for every step or, with ``return_sequences=False``, the last."""
        if self.return_sequences is False:
            return (input_shape[0], self.output_size)
        return tuple(input_shape[:-1]) + (self.output_size,)

    def random_generators(self):
        """``{"_dropout_rng": the generator of the dropout masks}`` (``dropout`` between
        stacked layers, ``input_dropout``, ``recurrent_dropout``): what
        ``rnnfast.distributed.seed_dropout`` reseeds per rank (see ``Layer.random_generators``)."""
        return {"_dropout_rng": self._dropout_rng}

    def summary(self):
        """Print (and return) a Keras-style table: one row per layer, output shapes and parameter
        counts in Keras's layout (one bias), plus the PyTorch-layout total (two biases)."""
        text = rnn_summary.summary_text(self)
        print(text)
        return text

    # ---- padding ---------------------------------------------------------------------------------

    def call_with_padding(self, x, valid, suspect, who, **kwargs):
        """The call inside a container: the valid mask runs as lengths (or Keras's mask), and
        is passed on with a returned sequence, ended with the last output (``nn.masking``)."""
        return call_rnn(self, x, valid, suspect, who, **kwargs)

    def takes_embedding(self, embedding, ids):
        """Can ``self(ids, embedding=embedding)`` stand for ``self(embedding(ids))``, and pay?
        (Sequential and Seq2Seq's encoder ask before fusing.) Fusing trades the (T*B)-row
        projection for a vocabulary-row one, so it needs fewer table rows than tokens; the two
        layers must agree on mode, dtype and width. Anything else (including bad ids) takes the
        unfused path and its errors."""
        if not is_embedding(embedding):
            return False
        ids = np.asarray(ids)
        return (
            ids.ndim == 2
            and ids.dtype.kind in "iu"
            and embedding.num_embeddings < ids.size
            and embedding.embedding_dim == self.input_size
            and embedding.dtype == self.dtype
            and embedding.training == self.training
            # every layer of an input_to_all stack reads the embedded sequence itself
            and not self._input_to_all
            # input dropout acts on the embedded sequence, which token input never builds
            and not (self.training and self.input_dropout > 0.0)
        )

    # ---- configuration and interop ---------------------------------------------------------------

    def _onnx_step_checks(self, who):
        """ONNX export, every cell: ValueError for dense skips (``input_to_all``,
        ``all_to_output``: not written), a dilated layer (the ONNX op steps through
        every time step) and for dropout masks in training mode (the inference graph draws
        none)."""
        op = self.cell.onnx_op
        for skip in ("input_to_all", "all_to_output"):
            if getattr(self, skip):
                raise ValueError(
                    f"{who}: {skip}=True (dense skips): the exporter writes a stack of ONNX "
                    f"{op} nodes each reading the one below; export a layer without {skip}"
                )
        if self._is_dilated():
            raise ValueError(
                f"{who}: dilation={self.dilation}: the ONNX {op} op steps through every time "
                "step; export a layer without dilation"
            )
        if self.training:
            for option, value in (
                ("dropout", self.dropout if self.num_layers > 1 else 0.0),
                ("input_dropout", self.input_dropout),
                ("recurrent_dropout", self.recurrent_dropout),
            ):
                if value > 0.0:
                    raise ValueError(
                        f"{who}: {option}={value} in training mode draws random masks, which "
                        "the exported inference graph does not; call model.eval() before export"
                    )

    def _common_config(self):
        """The constructor arguments every cell's layer has, for its ``get_config``
        (JSON-serialisable: the dtype by its name, the seed a Python int)."""
        return {
            "input_size": self.input_size,
            "hidden_size": self.hidden_size,
            "num_layers": self.num_layers,
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
            "input_dropout": self.input_dropout,
            "recurrent_dropout": self.recurrent_dropout,
            "zero_output_for_mask": self.zero_output_for_mask,
            "dilation": self.dilation,
            "input_to_all": self.input_to_all,
            "all_to_output": self.all_to_output,
            "precision": self.precision,
        }

    @classmethod
    def from_torch(cls, module):
        """A layer with the configuration and weights of the torch module of its cell
        (``torch.nn.RNN`` for ``RNN``, ``torch.nn.GRU`` for ``GRU``, ``torch.nn.LSTM`` for
        ``LSTM``; torch imported here)."""
        return rnn_torch.from_torch(module, cls)

    def to_torch(self):
        """The torch module of this layer's cell (``torch.nn.RNN``, ``torch.nn.GRU`` or
        ``torch.nn.LSTM``) with this layer's configuration and weights (torch imported here)."""
        return rnn_torch.to_torch(self)

    def __repr__(self):
        """Sizes, every option that differs from the constructor's default, and the dtype:
        two layers that compute differently never look the same."""
        shown = [
            f"{name}={getattr(self, name)!r}"
            for name, default in _option_defaults(type(self)).items()
            if getattr(self, name) != default
        ]
        return (
            f"{self.cell.torch_name}("
            f"{', '.join([str(self.input_size), str(self.hidden_size), *shown])}, "
            f"dtype={self.dtype.name})"
        )


class RNN(RecurrentLayer):
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
        ``reset_state()``. A dilated layer carries its last d states per layer (see
        ``dilation``), so that calls over consecutive pieces of a sequence give what one call
        over the whole sequence gives.
    alpha : float in (0, 1], or a list of one per layer
        Leak rate of leaky units.
    dilation : int in [1, 2**31], or a list of one per layer
        ``h_t`` reads ``h_{t-d}`` (temporal skip connections; ``[1, 2, 4, 8]``: a stack over
        multiple time scales), run as min(d, T) interleaved sequences: a call costs
        O(T * B * H) whatever d (a d at or beyond T reads only the initial state). Its state
        (``h0``, ``step``'s ``h``, a stateful layer's carry) may be one ring per layer and
        direction: ``ring[j]`` (B, H) is h_{j-d}, the state chain j starts from (``ring[-1]``
        the newest); a plain (layers*dirs, B, H) h0 starts every chain from it. A ring may be
        shorter than d, (m, B, H) with 1 <= m <= d: its first entry then stands for the
        d - m + 1 oldest. Rings grow as steps arrive: ``step`` and a stateful layer keep at
        most min(d, 1 + steps seen) states, never d of them up front.
    input_to_all : bool
        Dense skips from the input: every layer k > 0 reads the stack's input concatenated
        with the output of the layer below, ``[x_t, y^(k-1)_t]`` (``weight_ih_l{k}`` is then
        (H, input_size + H*dirs)), as the lecture notes' "feeding x^(t) directly to
        h_2^(t)". Fixed at construction; needs num_layers >= 2; not with ``residual``.
    all_to_output : bool
        Dense skips to the output: the output sequence is every layer's output concatenated
        on the feature axis, layer 0 first, each with its directions (num_layers * H * dirs
        wide; the notes' "connecting h_1^(t) directly to output y^(t)"). Between-layer
        ``dropout`` acts on what the next layer reads, not on these outputs. Needs
        num_layers >= 2 and merge_mode "concat".
    precision : {"float32", "bf16"}
        The products of forward, backward and ``step``: "bf16" rounds both operands of every
        GEMM to bf16 and sums in float32 (mixed-precision training, as ``torch.autocast`` on
        CPU); weights, gradients, gates and states stay float32. Needs a float32 layer and a
        CPU with bf16 products (``rnnfast.precision.bf16_available()``; elsewhere a
        RuntimeError naming the ISA). A ``Sequential``'s or ``fit``'s ``precision``, when
        given, wins over it for their calls.

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

    cell = ELMAN
    _torch_options = (("nonlinearity", "tanh"),)

    # The kernels of one (layer, direction) over a sequence and of one step, on this layer's
    # weights: the stack runner and step() call them; rnnfast.quantize's copies replace them.
    _direction_kernel = float_direction_kernel
    _step_kernel = staticmethod(functional.rnn_step)

    def _step_weights(self, layer):
        """The weight arguments of ``_step_kernel`` for stacked layer ``layer``, read live."""
        p = self._params
        n_ih, n_hh, n_bi, n_bh = self._names[layer]
        return p[n_ih], p[n_hh], p[n_bi] if n_bi else None, p[n_bh] if n_bh else None

    @step_products
    def step(self, x_t, h=None):
        """One time step for streaming inference: ``out_t, h_next = layer.step(x_t, h)``.

        x_t (B, input_size); h and h_next (num_layers, B, H) (zeros, or a stateful layer's
        carried state, when h is None); out_t (B, H) is the last layer's output (plus its input
        with ``residual``; every layer's, (B, num_layers*H), with ``all_to_output``). Unbatched, as torch: x_t (input_size,) with h (num_layers, H) gives
        out_t (H,) and h_next (num_layers, H) (a stateful layer carries it as a batch of one).
        No dropout, nothing kept for backward; unidirectional layers only.
        A stateful layer carries h_next to its next call. The parameters are read live: an
        in-place update (an optimizer's) is what the next step reads. out_t and h_next[-1] may
        be the same memory (copy before writing into either).

        The fastest form: a one-layer, undilated layer that is not stateful, called with x_t a
        C-contiguous (B, input_size) array of its dtype and the state as it came back from the
        last step (or None). That call goes straight to the layer's bound step
        (``_core.StepFunction``: no Python between the call and the kernel); any other runs the
        general path, with the same results.

        A dilated layer (``dilation``) reads h_{t-d}: its state is a list of one ring
        (d_k, B, H) per layer, ``ring[-1]`` the newest state (see ``RNN``), and h_next is
        such a list; h may also be (num_layers, B, H), every chain starting from it, as a
        forward's h0. Steps over a sequence then give the forward's outputs.
        """
        bound = (
            self._stepper
        )  # the hot path: one call into the kernels (nn.recurrent.rnn_streaming)
        if bound is None:
            bound = self._stepper = rnn_streaming.bind_step(self)
        out = bound(x_t, h)
        if out is not None:
            return out
        return rnn_streaming.elman_step(self, x_t, h)

    def _step_layers(self, x_t, previous):
        """One step of every layer from the states its recurrences read (``nn.recurrent.rnn_streaming``:
        a dilated layer's step asks this of every cell)."""
        return rnn_streaming.elman_step_layers(self, x_t, previous)

    def get_config(self):
        """The constructor arguments: ``RNN(**layer.get_config())`` builds the same architecture
        (fresh parameters; load a state_dict for the values). JSON-serialisable."""
        return {
            **self._common_config(),
            "nonlinearity": self.nonlinearity,
            "alpha": list(self.alpha) if isinstance(self.alpha, list) else self.alpha,
        }

    # ---- ONNX (rnnfast.io.onnx asks these; nn does not import io) ----------------------------

    def onnx_input(self):
        """ONNX export: as a model's first layer it reads float sequences of this width."""
        return self.input_size

    def onnx_state_shape(self):
        """ONNX export: a standalone layer's graph input h0 without its batch axis. A layer
        with a state over time reads the lengths, and its batch_first is the graph's layout."""
        return (self.num_layers * self.num_directions, self.hidden_size)

    def onnx_check(self, who):
        """ONNX export: ValueError for what the ONNX RNN op cannot compute (leaky units,
        dilation) or an inference graph cannot hold (dropout masks in training mode)."""
        alphas = self.alpha if isinstance(self.alpha, list) else [self.alpha]
        if any(float(a) != 1.0 for a in alphas):
            raise ValueError(
                f"{who}: alpha={self.alpha} (leaky units): the ONNX RNN op computes "
                "h_t = act(W x_t + R h_{t-1} + b) only, with no leak; export a layer with "
                "alpha=1.0"
            )
        self._onnx_step_checks(who)

    def onnx_weights(self, params):
        """ONNX export: ``(W, R, B)`` of the ONNX ``RNN`` op per (layer, direction), in
        PyTorch's order l * dirs + d, from ``params`` (this layer's names): W_ih, W_hh and
        ``[b_ih, b_hh]`` (None without bias). One gate: PyTorch's order is ONNX's."""
        return [
            (params[w], params[r], None if bi is None else np.concatenate([params[bi], params[bh]]))
            for w, r, bi, bh in self._names
        ]

    def load_onnx_weights(self, weights):
        """ONNX load: the inverse of :meth:`onnx_weights`, loaded as a state dict."""
        H = self.hidden_size
        state = {}
        for (w, r, bi, bh), (W, R, B) in zip(self._names, weights):
            state[w], state[r] = W, R
            if bi is not None:
                state[bi], state[bh] = B[:H], B[H:]
        self.load_state_dict(state)

    def onnx_emit(self, exporter, flow, who):
        """ONNX export: one ``RNN`` node per stacked layer; the exporter writes the stack, the
        lengths, h0 and the API forms around them."""
        return exporter.recurrent(
            self,
            flow,
            who,
            op="RNN",
            activations=["Tanh" if self.nonlinearity == "tanh" else "Relu"],
            weights=self.onnx_weights(exporter.float_params(self)),
            label=f"RNN(input_size={self.input_size})",
        )


@functools.cache
def _option_defaults(cls):
    """The options repr compares with their defaults, read from the constructor: one source."""
    return {
        name: param.default
        for name, param in inspect.signature(cls).parameters.items()
        if name not in ("self", "input_size", "hidden_size", "dtype", "seed")
        and name not in {n for n, _ in getattr(cls, "_ignored_options", ())}
    }
