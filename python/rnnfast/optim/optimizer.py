"""The optimizer base class: parameter groups over slots, zero_grad, step, state_dict."""

from __future__ import annotations

import numpy as np

from .._parameters import writing
from .._validation import check_int, check_keys, check_real_at_least
from ._params import _collect, _current_grads

__all__ = ["Optimizer"]


class Optimizer:
    """Base of the optimizers: the parameters, the hyper-parameters, the step count and the
    per-parameter buffers, with ``zero_grad``, ``state_dict`` and ``load_state_dict``.

    Subclasses name their hyper-parameters in ``_HYPER`` (validated by ``_check_hyper``) and
    their buffers in ``_BUFFERS``, and implement ``_update(i, param, grad)`` for the i-th array.
    """

    _HYPER: tuple = ()
    _BUFFERS: tuple = ()
    # hyper-parameters added after states were saved, with the default such a state loads with
    _ADDED_HYPER: dict = {}

    def __init__(self, params, **hyper):
        self._slots = _collect(params)
        self._hyper = self._check_hyper(hyper)
        self._step = 0
        # name -> list of one array per parameter; created by the first step (as PyTorch's
        # lazily created state: SGD's momentum buffer starts as the first gradient, not zeros)
        self._buffers = {}

    # lr is the one hyper-parameter schedules change, so it is an attribute
    @property
    def lr(self):
        """The learning rate (float >= 0); schedules set it between steps."""
        return self._hyper["lr"]

    @lr.setter
    def lr(self, value):
        self._hyper["lr"] = check_real_at_least("lr", value, 0)

    @property
    def hyperparameters(self):
        """A copy of the hyper-parameters, as passed to the constructor."""
        return dict(self._hyper)

    @property
    def slots(self):
        """The parameters it updates, in order: each with ``name``, ``param`` (the live array)
        and, for a module's, ``module`` and ``key`` (its gradient is ``module.grads[key]``);
        for a ``(param, grad)`` pair ``module`` is None. What a wrapper such as
        ``rnnfast.distributed.DistributedOptimizer`` reads."""
        return tuple(self._slots)

    def current_grads(self):
        """The gradient arrays of :attr:`slots` now, in the same order (live arrays, each
        shape-checked against its parameter: a ValueError names the one that differs)."""
        return _current_grads(self._slots)

    @property
    def step_count(self):
        """The number of ``step()`` calls so far (Adam's bias correction uses it)."""
        return self._step

    def step(self):
        """Update every parameter in place from its current gradient.

        Raises
        ------
        ValueError
            A module's gradient no longer has its parameter's shape (checked for all of them
            before any parameter changes).
        """
        # all gradients in the parameters' dtype (no copy when they are) and shape-checked first
        grads = [
            np.asarray(g, dtype=slot.param.dtype)
            for slot, g in zip(self._slots, _current_grads(self._slots))
        ]
        if not self._buffers and self._needs_buffers(self._hyper):
            self._buffers = self._initial_buffers()
        self._step += 1
        # the layers' parameters are read-only: written here through the sanctioned path,
        # which also tells every layer to pack its weights again
        with writing([slot.param for slot in self._slots]):
            for i, (slot, grad) in enumerate(zip(self._slots, grads)):
                self._update(i, slot.param, grad)

    def zero_grad(self):
        """Set every gradient to zero, in place (a module's ``backward`` adds into them)."""
        for g in _current_grads(self._slots):
            g.fill(0)

    def state_dict(self):
        """A snapshot: ``{"optimizer": class name, "hyperparameters": {...}, "step": int,
        "buffers": {name: [array per parameter]}}`` of copied arrays, plain floats and ints
        (``buffers`` is empty before the first step)."""
        return {
            "optimizer": type(self).__name__,
            "hyperparameters": dict(self._hyper),
            "step": self._step,
            "buffers": {name: [b.copy() for b in bufs] for name, bufs in self._buffers.items()},
        }

    def load_state_dict(self, state_dict):
        """Restore a ``state_dict()`` of an optimizer of the same class over parameters of the
        same shapes. Everything is checked before anything changes.

        Raises
        ------
        TypeError
            Not a mapping, or a value of the wrong type.
        ValueError
            Another optimizer's state, missing or unknown keys, a bad hyper-parameter, a buffer
            list of the wrong length or an array of the wrong shape (the message names it).
        """
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"state_dict: expected a mapping, got {type(state_dict).__name__}")
        check_keys("state_dict", state_dict, ("optimizer", "hyperparameters", "step", "buffers"))
        if state_dict["optimizer"] != type(self).__name__:
            raise ValueError(
                f"state_dict: holds the state of {state_dict['optimizer']!r}, "
                f"not of {type(self).__name__!r}"
            )
        hyper = state_dict["hyperparameters"]
        if hasattr(hyper, "keys"):  # a state saved before a hyper-parameter existed: its default
            hyper = {**self._ADDED_HYPER, **hyper}
        check_keys("state_dict['hyperparameters']", hyper, self._HYPER)
        hyper = self._check_hyper(dict(hyper))
        step = check_int("state_dict['step']", state_dict["step"], 0)
        buffers = self._checked_buffers(state_dict["buffers"], step, hyper)
        self._hyper, self._step, self._buffers = hyper, step, buffers

    def _checked_buffers(self, buffers, step, hyper):
        if not hasattr(buffers, "keys"):
            raise TypeError(
                f"state_dict['buffers']: expected a mapping, got {type(buffers).__name__}"
            )
        # all buffers or none: they are created together, by the first step that needs them
        if buffers or (step > 0 and self._needs_buffers(hyper)):
            check_keys("state_dict['buffers']", buffers, self._BUFFERS)
        return {name: self._checked_buffer_list(name, buffers[name]) for name in buffers}

    def _checked_buffer_list(self, name, arrays):
        where = f"state_dict['buffers'][{name!r}]"
        if not isinstance(arrays, (list, tuple)) or len(arrays) != len(self._slots):
            got = len(arrays) if isinstance(arrays, (list, tuple)) else type(arrays).__name__
            raise ValueError(f"{where}: expected a list of {len(self._slots)} arrays, got {got}")
        out = []
        for i, (slot, value) in enumerate(zip(self._slots, arrays)):
            arr = np.asarray(value)
            if arr.dtype.kind not in "fiu":
                raise TypeError(f"{where}[{i}]: expected a real array, got dtype {arr.dtype}")
            if arr.shape != slot.param.shape:
                raise ValueError(
                    f"{where}[{i}] ({slot.name}): expected shape {slot.param.shape}, "
                    f"got shape {arr.shape}"
                )
            # a C-contiguous copy: no aliasing the dict, and flat views for the kernels
            out.append(np.array(arr, dtype=slot.param.dtype, order="C"))
        return out

    def _needs_buffers(self, hyper):
        """Whether a step with these hyper-parameters creates the buffers."""
        return bool(self._BUFFERS)

    def _initial_buffers(self):
        # C-contiguous whatever the parameter's layout: the kernels update flat views
        return {
            name: [np.zeros(s.param.shape, s.param.dtype) for s in self._slots]
            for name in self._BUFFERS
        }

    def _check_hyper(self, hyper):  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def _update(self, i, param, grad):  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._hyper.items())
        return f"{type(self).__name__}({len(self._slots)} parameters, {args})"
