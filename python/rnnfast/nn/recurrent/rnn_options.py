"""The recurrent layers' options: the constructor's one declaration (``signature``), and each
option's check, run at construction and again on every assignment. A layer class declares its
options as properties made here (``option``: checked on assignment; ``fixed``: fixed at
construction where the parameters' shapes depend on it), so the check of an option is written
once, whatever class holds it. A forward reads them once into ``ForwardOptions``, which its backward
uses: an option assigned between the two cannot make the gradient differ from the forward it
differentiates."""

from __future__ import annotations

import inspect
import operator
import warnings
from typing import NamedTuple

import numpy as np

from ..._validation import (
    check_alpha as check_alpha_value,
)
from ..._validation import (
    check_bool,
    check_nonlinearity,
    check_optional_bool,
    check_positive_int,
    check_probability,
)
from .._mixed_precision import check_layer_precision
from .._shapes import MAX_DILATION


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


__all__ = [
    "BATCH_FIRST",
    "MERGE_MODES",
    "NONLINEARITY",
    "PRECISION",
    "fixed",
    "option",
    "signature",
]

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
    ("precision", "float32"),
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


class ForwardOptions(NamedTuple):
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
    precision: str = "float32"


def fixed(name, why):
    """A property fixed at construction: reading gives ``layer._<name>``, assigning raises an
    AttributeError that says to build a new layer."""

    def refuse(self, value):
        raise AttributeError(
            f"{name} is fixed at construction ({why}); build a new layer instead: "
            f"{type(self).__name__}(**{{**layer.get_config(), {name!r}: {value!r}}})"
        )

    # attrgetter: a C-level getter, as fast as reading the attribute itself
    return property(operator.attrgetter("_" + name), refuse, doc=f"Fixed at construction ({why}).")


def option(name, check, doc):
    """A checked option, as a property of the class that declares it: reading gives
    ``layer._<name>``; assigning stores ``check(layer, name, value)``, the check the
    constructor runs too (it raises for a bad value, and may update what the option decides:
    the bound step, a carried state, a derived attribute)."""
    attr = "_" + name

    def assign(layer, value):
        setattr(layer, attr, check(layer, name, value))

    return property(operator.attrgetter(attr), assign, doc=doc)


def _plain(validator):
    """An option's check from a validator of ``(name, value)`` that needs nothing of the layer."""
    return lambda layer, name, value: validator(name, value)


FLAG = _plain(check_bool)
OPTIONAL_FLAG = _plain(check_optional_bool)
PROBABILITY = _plain(check_probability)


def unbinding(check):
    """``check``, then drop the layer's bound step (``nn.recurrent.rnn_streaming.bind_step``), which was
    bound with the option's old value."""

    def checked(layer, name, value):
        value = check(layer, name, value)
        layer._stepper = None
        return value

    return checked


# the options every recurrent layer has, JordanRNN's too
NONLINEARITY = option(
    "nonlinearity",
    unbinding(lambda layer, name, value: check_nonlinearity(value)),
    """``"tanh"`` or ``"relu"``.""",
)
BATCH_FIRST = option("batch_first", FLAG, "Sequences as (B, T, ...) instead of (T, B, ...).")
PRECISION = option(
    "precision",
    check_layer_precision,
    """The products of the layer's forward, backward and step: ``"float32"`` (the default), or
    ``"bf16"``: both operands of every GEMM rounded to bf16, float32 sums; weights, gradients,
    gates and states stay float32 (``rnnfast.precision``; the docs' mixed-precision page). A
    ``Sequential``'s or ``fit``'s ``precision``, when given, wins over it for their calls.""",
)


def check_input_to_all(layer, name, value):
    """The constructor's ``input_to_all`` (fixed afterwards: it shapes ``weight_ih_l{k}`` of
    the layers k > 0)."""
    value = check_bool(name, value)
    if value and layer.num_layers < 2:
        raise ValueError(
            "input_to_all: feeds the stack's input to the layers k > 0 of a stack; "
            f"num_layers={layer.num_layers} has none (use num_layers >= 2)"
        )
    if value and getattr(layer, "_residual", False):
        raise ValueError(
            "input_to_all=True with residual=True: a residual connection adds a layer's "
            "input to its output, and with input_to_all the input of a layer k > 0 is "
            "wider (input_size + H*dirs) than its output; choose one of them"
        )
    return value


def check_dropout(layer, name, value, stacklevel=3):
    """dropout; with one layer, torch's warning that it has nothing to act on (pointed at the
    user's line: the constructor and the setter call this alike)."""
    value = check_probability(name, value)
    if value > 0.0 and layer.num_layers == 1:
        warnings.warn(
            "dropout option adds dropout after all but last recurrent layer, so non-zero "
            f"dropout expects num_layers greater than 1, but got dropout={value} and "
            f"num_layers={layer.num_layers}",
            UserWarning,
            stacklevel=stacklevel,
        )
    return value


def check_residual(layer, name, value):
    value = check_bool(name, value)
    if value and layer.num_layers < 2:
        raise ValueError(
            "residual: skip connections join the layers k > 0 of a stack to their inputs; "
            f"num_layers={layer.num_layers} has none (use num_layers >= 2)"
        )
    if value and layer._input_to_all:
        raise ValueError(
            "residual=True with input_to_all=True: with input_to_all the input of a layer "
            "k > 0 (input_size + H*dirs wide) cannot be added to its output (H*dirs); "
            "build the layer without one of them"
        )
    return value


def check_all_to_output(layer, name, value):
    value = check_bool(name, value)
    if value and layer.num_layers < 2:
        raise ValueError(
            "all_to_output: concatenates every layer's output of a stack; "
            f"num_layers={layer.num_layers} has only one (use num_layers >= 2)"
        )
    if value and getattr(layer, "_merge_mode", "concat") != "concat":
        raise ValueError(
            f"all_to_output=True with merge_mode={layer._merge_mode!r}: the merge modes "
            "combine the last layer's two directions, and all_to_output returns every "
            "layer's directions concatenated; use merge_mode='concat'"
        )
    return value


def check_merge_mode(layer, name, value):
    if not isinstance(value, (str, type(None))) or value not in MERGE_MODES:
        raise ValueError(f"merge_mode: expected one of {MERGE_MODES}, got {value!r}")
    if value != "concat" and not layer.bidirectional:
        raise ValueError(
            f"merge_mode={value!r}: merges the two directions, needs bidirectional=True"
        )
    if value != "concat" and layer._all_to_output:
        raise ValueError(
            f"merge_mode={value!r} with all_to_output=True: the output is every layer's "
            "directions concatenated; only merge_mode='concat' applies"
        )
    return value


def check_stateful(layer, name, value):
    value = check_bool(name, value)
    if value != getattr(layer, "_stateful", value):
        # a state carried before the change belongs to another way of running: forget it
        layer._state = None
    layer._stepper = None  # bound for the other way of running
    return value


def check_alpha(layer, name, value):
    """alpha, a float or one per layer; sets the per-layer list ``_alphas`` the runner reads."""
    if isinstance(value, (list, tuple)):
        if len(value) != layer.num_layers:
            raise ValueError(
                f"alpha: expected a float or a list of num_layers={layer.num_layers} floats, "
                f"got a list of {len(value)}"
            )
        alpha = alphas = [check_alpha_value(a) for a in value]
    else:
        alpha = check_alpha_value(value)
        alphas = [alpha] * layer.num_layers
    layer._alphas = alphas
    layer._stepper = None  # bound with the old one
    return alpha


def check_dilation(layer, name, value):
    """dilation, an int or one per layer; sets the per-layer tuple ``_dilations`` the runner
    reads."""
    values = list(value) if isinstance(value, (list, tuple)) else [value] * layer.num_layers
    if len(values) != layer.num_layers:
        raise ValueError(
            f"dilation: expected an int or a list of num_layers={layer.num_layers} ints, got "
            f"a list of {len(values)}"
        )
    # bounded (nn._shapes.MAX_DILATION): a file cannot name any size; the cost is the call's
    dilations = tuple(_check_dilation(v) for v in values)
    if dilations != getattr(layer, "_dilations", dilations):
        # a carried state holds as many past states per layer as its dilation: forget it
        layer._state = None
    layer._dilations = dilations
    layer._stepper = None  # bound for one dilation
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else int(value)
