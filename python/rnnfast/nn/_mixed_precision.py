"""Which products the fronts' kernel calls multiply with (issue 40; ``rnnfast.precision`` sets
them for the calling thread, this module decides what to set):

- a recurrent layer's own ``precision``: "bf16" runs its forward, backward and step with bf16
  products (``layer_products``, entered by the stack runner and ``step``); "float32", the
  default, changes nothing, so a choice made around the call stands;
- a model's or a fit's choice (``Sequential(precision=)``, ``fit(precision=)``): every float32
  kernel call on the thread inside it, a Dense head's included, whatever each layer's own
  ``precision`` says (``model_products``). The outermost such choice wins for its span: fit's
  over a Sequential's, a Sequential's over its layers'.

Both are the calling thread's: a float32 call on another thread is never affected.
``check_model_precision`` refuses, by name, a model that would train in bf16 only in part: a
quantized copy, a float64 layer, a layer that multiplies outside rnnfast's kernels.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import warnings

import numpy as np

from .. import _core
from ..precision import bf16_available, check_precision, products

__all__ = [
    "check_layer_precision",
    "check_model_precision",
    "layer_products",
    "loading_from_file",
    "model_products",
    "products_note",
    "step_products",
]

# this thread's model / fit choice ("float32" or "bf16"), or None where none was made
_chosen = threading.local()


def chosen_precision():
    """The precision a model or fit chose around this thread's calls now, or None."""
    return getattr(_chosen, "precision", None)


def layer_products(precision):
    """The block of a layer's kernel calls with the layer's own ``precision``: bf16 products,
    unless a model or fit around it chose (theirs, set already, stands). "float32" sets
    nothing: a layer that asked for nothing follows the choice made around it."""
    if precision == "float32" or chosen_precision() is not None:
        return contextlib.nullcontext()
    return products(precision)


_UNSET = object()  # a step's state not given


def step_products(step):
    """``layer.step`` run inside :func:`layer_products` of the layer's precision (the stack
    runner enters it for forward and backward; a step does not go through the runner). The
    state keeps the name the wrapped step gives it (``h=`` for RNN, ``state=`` for GRU and
    LSTM): both wrappers below pass it on as the caller gave it."""
    name = list(inspect.signature(step).parameters)[2]

    # the step's own arguments, not *args: packing them cost half a bound step's time
    def run(self, x_t, state=_UNSET, /, **named):
        if not named and self._precision == "float32":  # the hot path: the bound step at once
            bound = self._stepper
            if bound is not None:
                out = bound(x_t, None if state is _UNSET else state)
                if out is not None:
                    return out
        if named:  # the state by its keyword
            if state is not _UNSET or len(named) != 1 or name not in named:
                given = () if state is _UNSET else (state,)
                return step(self, x_t, *given, **named)  # the step's own TypeError
            state = named[name]
        elif state is _UNSET:
            state = None
        if self._precision == "float32":  # the default, in one comparison: the hot path
            return step(self, x_t, state)
        with layer_products(self._precision):
            return step(self, x_t, state)

    return functools.wraps(step)(run)


@contextlib.contextmanager
def model_products(precision):
    """The block of a model's or fit's calls with ``precision`` for every float32 kernel call
    on this thread, whatever a layer's own says; None (each layer's own) sets nothing, and
    inside an outer choice neither does a nested one (the outermost wins)."""
    if precision is None or chosen_precision() is not None:
        yield
        return
    _chosen.precision = precision
    try:
        with products(precision):
            yield
    finally:
        _chosen.precision = None


# set while a file's layers are rebuilt (``loading_from_file``): a saved "bf16" then becomes
# "float32", with a warning, on a machine without bf16 products
_loading = threading.local()


@contextlib.contextmanager
def loading_from_file():
    """The block in which ``load`` rebuilds a file's layers: a model trained with bf16
    products loads on any CPU (a file is not a request to train), its saved ``precision="bf16"``
    kept where this machine runs it and, elsewhere, float32 with a RuntimeWarning naming why."""
    before = getattr(_loading, "on", False)
    _loading.on = True
    try:
        yield
    finally:
        _loading.on = before


def _loaded(value, name):
    """A saved ``precision`` for this machine (see :func:`loading_from_file`)."""
    if value == "bf16" and getattr(_loading, "on", False) and not bf16_available():
        warnings.warn(
            f"{name}='bf16' was saved with this model, but this machine runs no bf16 products "
            f"({_core.bf16_unavailable_reason()}); it loads with {name}='float32'",
            RuntimeWarning,
            stacklevel=4,
        )
        return "float32"
    return value


def check_layer_precision(layer, name, value):
    """A layer's ``precision`` option (the check at construction and on assignment): one of
    ``rnnfast.precision.PRECISIONS``, "bf16" for float32 layers on a machine that runs it;
    a quantized copy refuses "bf16" (it multiplies with its own bf16 / int8 weights)."""
    value = _loaded(value, name)
    mode = getattr(layer, "quantized", None)
    if value == "bf16" and mode is not None:
        raise ValueError(
            f"{name}='bf16': {type(layer).__name__} is a quantized ({mode}) inference copy, "
            f"whose products use its {mode} weights; bf16 products are for the float32 layer: "
            f"set {name}='bf16' on the layer it was made from, or keep {name}='float32' here"
        )
    return check_precision(value, layer.dtype, name=name)


def check_model_precision(model, precision, name="precision"):
    """``precision`` for everything ``model`` runs, checked: None (each layer's own), or one of
    ``rnnfast.precision.PRECISIONS``. For "bf16" every layer of the model with parameters must
    run all its products on rnnfast's float32 kernels, else a ValueError naming it (a
    quantized copy, a float64 layer, a layer that multiplies in NumPy: it would stay float32,
    a model trained in bf16 only in part); then a RuntimeError naming the ISA where this
    machine has no bf16 products."""
    if precision is None:
        return None
    precision = _loaded(precision, name)
    if precision == "bf16":
        for where, layer in _layers(model, "model"):
            _check_bf16_layer(where, layer, name)
    return check_precision(precision, name=name)


def _layers(layer, where):
    """``(where, layer)`` of every layer that computes: the containers' children, nested, and
    a quantized container itself (its children are copies made for it)."""
    children = getattr(layer, "named_children", None)
    if callable(children) and getattr(layer, "quantized", None) is None:
        for prefix, child in children():
            yield from _layers(child, f"{where}.{prefix}")
    else:
        yield where, layer


def _check_bf16_layer(where, layer, name):
    kind = type(layer).__name__
    mode = getattr(layer, "quantized", None)
    if mode is not None:
        raise ValueError(
            f"{name}='bf16': {where} ({kind}) is a quantized ({mode}) inference copy, whose "
            f"products use its {mode} weights; bf16 products are for float32 models: run the "
            f"float32 model it was made from with {name}='bf16', or this one with {name}=None"
        )
    params = list(layer.parameters()) if callable(getattr(layer, "parameters", None)) else []
    wrong = sorted({p.dtype.name for p in params if p.dtype != np.float32})
    if wrong:
        raise ValueError(
            f"{name}='bf16': {where} ({kind}) has {'/'.join(wrong)} parameters; bf16 products "
            "keep float32 weights, states and sums: build the model with dtype=np.float32 "
            f"(model32.load_state_dict(model.state_dict()) converts the weights), or use "
            f"{name}='float32'"
        )
    if params and not getattr(layer, "kernel_products", False):
        raise ValueError(
            f"{name}='bf16': {where} ({kind}) does not run all its products on rnnfast's "
            f"float32 kernels (kernel_products is False), so they would stay float32 in a "
            f"model trained in bf16; use {name}='float32' for this model (a layer of your own "
            "whose products are all rnnfast layers or rnnfast.functional calls may set "
            "kernel_products = True)"
        )


def products_note(precision):
    """The line a summary adds for a precision other than float32's, else None."""
    if precision in (None, "float32"):
        return None
    return f"Products: {precision} operands, float32 sums (precision={precision!r})"
