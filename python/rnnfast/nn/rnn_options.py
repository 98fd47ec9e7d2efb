"""The RNN layer's options, checked at construction and again on every assignment, and fixed
where changing them makes no sense (the parameters' shapes depend on them). A forward reads
them once into ``_Options``, which its backward uses: an option assigned between the two cannot
make the gradient differ from the forward it differentiates."""

from __future__ import annotations

import inspect
import operator
import warnings
from typing import NamedTuple

import numpy as np

from .._validation import (
    check_alpha,
    check_bool,
    check_nonlinearity,
    check_optional_bool,
    check_positive_int,
    check_probability,
)
from ._shapes import MAX_DILATION
from .rnn_rings import map_state


def _check_dilation(value):
    """One layer's dilation: an int in [1, MAX_DILATION] (nn._shapes)."""
    d = check_positive_int("dilation", value)
    if d > MAX_DILATION:
        raise ValueError(
            f"dilation: expected an int in [1, {MAX_DILATION}] (2**31), got {d}: a dilation at "
            "or beyond a sequence's length reads only the initial state, so "
            f"dilation={MAX_DILATION} gives the same result"
        )
    return d


__all__ = ["MERGE_MODES", "RNNOptions", "RecurrentOptions", "signature"]

MERGE_MODES = ("concat", "sum", "mul", "ave", None)

# The recurrent layers' constructor, declared once for RNN, GRU, LSTM and DeepTransitionRNN:
# torch's positional arguments (a class adds its cell's after num_layers: the Elman layer's
# nonlinearity, ``_torch_options``), then keyword-only the cell's own options
# (``_cell_options_declared``), the options every recurrent layer has, and the options a class
# accepts and ignores (``_ignored_options``: Keras's scheduling options). A class's signature
# (help(), inspect, the docs, repr's defaults, get_config's checks) is built from these.
_REQUIRED = inspect.Parameter.empty
POSITIONAL = (("input_size", _REQUIRED), ("hidden_size", _REQUIRED), ("num_layers", 1))
POSITIONAL_TAIL = (
    ("bias", True),
    ("batch_first", False),
    ("dropout", 0.0),
    ("bidirectional", False),
    ("dtype", np.float32),
    ("seed", None),
)
KEYWORDS = (
    ("residual", False),
    ("merge_mode", "concat"),
    ("go_backwards", False),
    ("return_sequences", None),
    ("return_state", None),
    ("stateful", False),
    ("alpha", 1.0),
    ("input_dropout", 0.0),
    ("recurrent_dropout", 0.0),
    ("zero_output_for_mask", None),
    ("dilation", 1),
    ("input_to_all", False),
    ("all_to_output", False),
)
# fixed at construction (checked there, read-only after) or set apart, never by their setters
_NOT_SET = ("input_size", "hidden_size", "num_layers", "bias", "bidirectional", "dtype", "seed")
_NOT_SET += ("input_to_all", "dropout")


def signature(cls):
    """The constructor's signature of a recurrent layer class, from the declaration above and
    the class's ``_torch_options``, ``_cell_options_declared`` and ``_ignored_options``."""
    kind = inspect.Parameter
    positional = POSITIONAL + cls._torch_options + POSITIONAL_TAIL
    keywords = cls._cell_options_declared + KEYWORDS + cls._ignored_options
    return inspect.Signature(
        [kind(n, kind.POSITIONAL_OR_KEYWORD, default=d) for n, d in positional]
        + [kind(n, kind.KEYWORD_ONLY, default=d) for n, d in keywords]
    )


def set_options(layer, arguments):
    """The options a constructor passes through their setters (the checks of assignment), in
    the signature's order; the fixed ones and the ignored ones are the caller's."""
    ignored = {n for n, _ in type(layer)._ignored_options}
    fixed = set(type(layer)._fixed_options)
    for name, value in arguments.items():
        if name not in _NOT_SET and name not in ignored and name not in fixed:
            setattr(layer, name, value)


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
    cell_options: dict | None = None
    all_to_output: bool = False


def _read_only(name, why):
    """A property fixed at construction: reading gives the value, assigning raises an
    AttributeError that says to build a new layer."""

    def refuse(self, value):
        raise AttributeError(
            f"{name} is fixed at construction ({why}); build a new layer instead: "
            f"{type(self).__name__}(**{{**layer.get_config(), {name!r}: {value!r}}})"
        )

    # attrgetter: a C-level getter, as fast as reading the attribute itself
    return property(operator.attrgetter("_" + name), refuse, doc=f"Fixed at construction ({why}).")


class RecurrentOptions:
    """The options every recurrent layer has (RNN, JordanRNN), checked on assignment."""

    @property
    def nonlinearity(self):
        """``"tanh"`` or ``"relu"``."""
        return self._nonlinearity

    @nonlinearity.setter
    def nonlinearity(self, value):
        self._nonlinearity = check_nonlinearity(value)
        self._stepper = None  # a recurrent layer's bound step (nn.rnn_streaming) read the old one

    @property
    def batch_first(self):
        """Sequences as (B, T, ...) instead of (T, B, ...)."""
        return self._batch_first

    @batch_first.setter
    def batch_first(self, value):
        self._batch_first = check_bool("batch_first", value)


class RNNOptions:
    """Mixin of the recurrent layers (``nn.rnn.RecurrentLayer``): their options as checked
    properties."""

    # the options every recurrent layer has, JordanRNN's too
    nonlinearity = RecurrentOptions.nonlinearity
    batch_first = RecurrentOptions.batch_first

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
    input_to_all = _read_only("input_to_all", "the input width of the layers k > 0 depends on it")

    # class defaults: layers pickled (or copied) before the dense skips existed read False
    _input_to_all = False
    _all_to_output = False

    def _checked_input_to_all(self, value):
        """The constructor's ``input_to_all`` checked (fixed afterwards: it shapes
        ``weight_ih_l{k}`` of the layers k > 0)."""
        value = check_bool("input_to_all", value)
        if value and self.num_layers < 2:
            raise ValueError(
                "input_to_all: feeds the stack's input to the layers k > 0 of a stack; "
                f"num_layers={self.num_layers} has none (use num_layers >= 2)"
            )
        if value and getattr(self, "_residual", False):
            raise ValueError(
                "input_to_all=True with residual=True: a residual connection adds a layer's "
                "input to its output, and with input_to_all the input of a layer k > 0 is "
                "wider (input_size + H*dirs) than its output; choose one of them"
            )
        return value

    @property
    def dropout(self):
        """Drop probability in [0, 1] between stacked layers, in training mode."""
        return self._dropout

    @dropout.setter
    def dropout(self, value):
        self._dropout = self._checked_dropout(value)

    def _checked_dropout(self, value, stacklevel=3):
        """dropout checked; with one layer, torch's warning that it has nothing to act on
        (pointed at the user's line: the constructor and the setter call this alike)."""
        value = check_probability("dropout", value)
        if value > 0.0 and self.num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={value} and "
                f"num_layers={self.num_layers}",
                UserWarning,
                stacklevel=stacklevel,
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
        if value and self._input_to_all:
            raise ValueError(
                "residual=True with input_to_all=True: with input_to_all the input of a layer "
                "k > 0 (input_size + H*dirs wide) cannot be added to its output (H*dirs); "
                "build the layer without one of them"
            )
        self._residual = value

    @property
    def all_to_output(self):
        """Dense skips to the output: the stack's output is every layer's output sequence
        concatenated on the feature axis, layer 0 first (num_layers * dirs * R wide)."""
        return self._all_to_output

    @all_to_output.setter
    def all_to_output(self, value):
        value = check_bool("all_to_output", value)
        if value and self.num_layers < 2:
            raise ValueError(
                "all_to_output: concatenates every layer's output of a stack; "
                f"num_layers={self.num_layers} has only one (use num_layers >= 2)"
            )
        if value and getattr(self, "_merge_mode", "concat") != "concat":
            raise ValueError(
                f"all_to_output=True with merge_mode={self._merge_mode!r}: the merge modes "
                "combine the last layer's two directions, and all_to_output returns every "
                "layer's directions concatenated; use merge_mode='concat'"
            )
        self._all_to_output = value

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
        if value != "concat" and self._all_to_output:
            raise ValueError(
                f"merge_mode={value!r} with all_to_output=True: the output is every layer's "
                "directions concatenated; only merge_mode='concat' applies"
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
        if value != getattr(self, "_stateful", value):
            # a state carried before the change belongs to another way of running: forget it
            self._state = None
        self._stateful = value
        self._stepper = None  # bound for the other way of running

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
        self._stepper = None  # bound with the old one

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
        # bounded (nn._shapes.MAX_DILATION): a file cannot name any size; the cost is the call's
        dilations = tuple(_check_dilation(v) for v in values)
        if dilations != getattr(self, "_dilations", dilations):
            # a carried state holds as many past states per layer as its dilation: forget it
            self._state = None
        self._dilation = [int(v) for v in value] if isinstance(value, (list, tuple)) else int(value)
        self._dilations = dilations
        self._stepper = None  # bound for one dilation

    def _zero_output(self, o):
        if o.zero_output_for_mask is not None:
            return o.zero_output_for_mask
        sequences = not o.keras or bool(o.return_sequences)
        return self.bidirectional and sequences

    def _options(self):
        """The options as they are now, for one forward and its backward."""
        return _Options(
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
        )

    def _cell_options(self):
        """The keyword options of a gated cell's kernels (``nn.cells``), None for the Elman
        cell (its nonlinearity and alphas travel apart)."""
        return None

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

    def _keras(self):
        return self.return_sequences is not None or self.return_state is not None
