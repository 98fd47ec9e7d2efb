"""What an optimizer or a clipping function is given (a module, a list of modules, or (param, grad)
pairs) as slots: each parameter array with the gradient array it reads."""

from __future__ import annotations

import numpy as np

from .._parameters import can_write


class _Slot:
    """One parameter array and where its gradient lives. A module's gradient is looked up at
    each use, not once: a module may replace an entry of ``grads`` rather than add into it."""

    __slots__ = ("_grad", "_key", "_module", "name", "param")

    def __init__(self, name, param, module=None, key=None, grad=None):
        self.name = name  # for messages: the key, prefixed with the module's place in a list
        self.param = param
        self._module = module
        self._key = key
        self._grad = grad

    @property
    def module(self):
        """The module whose ``grads[key]`` is the gradient, or None for a (param, grad) pair."""
        return self._module

    @property
    def key(self):
        """The parameter's name within :attr:`module`."""
        return self._key

    def grad(self, grads_of):
        """The current gradient; ``grads_of(module)`` is that module's ``grads`` mapping."""
        grad = self._grad if self._module is None else grads_of(self._module)[self._key]
        if grad.shape != self.param.shape:
            raise ValueError(
                f"gradient of {self.name}: expected shape {self.param.shape} (the parameter's), "
                f"got shape {grad.shape}"
            )
        return grad


def _current_grads(slots):
    """The gradient arrays of ``slots`` now, each shape checked. A container's ``grads`` may be
    a property that builds its mapping on each read: it is read once per module here."""
    mappings = {}

    def grads_of(module):
        key = id(module)
        if key not in mappings:
            mappings[key] = module.grads
        return mappings[key]

    return [slot.grad(grads_of) for slot in slots]


def _is_module(obj):
    return hasattr(obj, "named_parameters") and hasattr(obj, "grads")


def _check_param(name, param):
    if not isinstance(param, np.ndarray):
        raise TypeError(f"{name}: expected a NumPy array, got {type(param).__name__}")
    if param.dtype.kind != "f":
        raise TypeError(f"{name}: expected a float array, got dtype {param.dtype}")
    # a layer's live parameters are read-only (its packed weights are kept between calls):
    # the optimizer writes them through rnnfast._parameters.writing, which needs memory that
    # can be made writeable
    if not can_write(param):
        raise ValueError(
            f"{name}: the array's memory is read-only (a view of a read-only buffer); an "
            "optimizer updates it in place: give it a writeable copy"
        )


def _module_slots(module, prefix):
    slots = []
    for name, param in module.named_parameters():
        _check_param(prefix + name, param)
        if name not in module.grads:
            raise ValueError(f"{prefix}{name}: the module has no gradient under this name")
        slots.append(_Slot(prefix + name, param, module=module, key=name))
    return slots


def _pair_slot(i, pair):
    try:
        param, grad = pair
    except (TypeError, ValueError):
        raise TypeError(
            f"params[{i}]: expected a module or a (param, grad) pair of arrays, "
            f"got {type(pair).__name__}"
        ) from None
    name = f"params[{i}]"
    _check_param(name, param)
    _check_param(f"{name} gradient", grad)
    if grad.shape != param.shape:
        raise ValueError(
            f"{name}: gradient shape {grad.shape} differs from the parameter's {param.shape}"
        )
    return _Slot(name, param, grad=grad)


def _collect(params):
    """The slots of a module, a list of modules or a list of (param, grad) pairs."""
    if _is_module(params):
        slots = _module_slots(params, "")
    else:
        if isinstance(params, (np.ndarray, str, bytes)) or not hasattr(params, "__iter__"):
            raise TypeError(
                "params: expected a module, a list of modules or a list of (param, grad) pairs, "
                f"got {type(params).__name__}"
            )
        slots = []
        for i, item in enumerate(params):
            if _is_module(item):
                slots.extend(_module_slots(item, f"params[{i}]."))
            else:
                slots.append(_pair_slot(i, item))
    if not slots:
        raise ValueError("params: an empty parameter list")
    seen = set()
    for slot in slots:
        # updating one array twice per step would silently double its learning rate
        if id(slot.param) in seen:
            raise ValueError(f"params: the parameter {slot.name} is given more than once")
        seen.add(id(slot.param))
    return slots


# ---- optimizers ---------------------------------------------------------------------------------
