"""Optimizers, gradient clipping and learning-rate schedules for rnnfast modules.

The update rules are PyTorch's (``torch.optim.SGD``, ``Adam``, ``AdamW`` and
``torch.optim.lr_scheduler``), written as whole-array NumPy operations that change the
parameter arrays in place, in their own dtype. An optimizer reads the gradients a module's
``backward`` accumulated in ``module.grads``; a training step is::

    opt = Adam(layer, lr=1e-3)
    layer.zero_grad()            # or opt.zero_grad()
    y, h_n = layer(x)
    layer.backward(dy)
    clip_grad_norm(layer, 1.0)
    opt.step()

``params`` (of the optimizers and the clipping functions) is a module (anything with
``named_parameters()`` and ``grads``), a list of modules, or a list of ``(param, grad)`` array
pairs. Parameters are updated through the very arrays the module holds, so a module must update
its parameters in place (``RNN.load_state_dict`` does) for an optimizer built before to see them.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from . import _core

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "CosineAnnealingLR",
    "Optimizer",
    "ReduceLROnPlateau",
    "StepLR",
    "clip_grad_norm",
    "clip_grad_value",
]


# ---- arguments ----------------------------------------------------------------------------------


def _real(name, value):
    """``value`` as a float, or TypeError (bools are refused: ``lr=True`` is a mistake)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a real number, got {type(value).__name__}")
    return float(value)


def _at_least(name, value, low):
    """A real number >= ``low``; NaN fails the comparison, so it is refused too."""
    x = _real(name, value)
    if not x >= low:
        raise ValueError(f"{name}: expected a number >= {low}, got {value!r}")
    return x


def _in_unit_interval(name, value, *, closed):
    x = _real(name, value)
    ok = 0.0 <= x <= 1.0 if closed else 0.0 <= x < 1.0
    if not ok:
        interval = "[0, 1]" if closed else "[0, 1)"
        raise ValueError(f"{name}: expected a number in {interval}, got {value!r}")
    return x


def _int_at_least(name, value, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name}: expected an int >= {low}, got {value}")
    return int(value)


def _betas(value):
    try:
        beta1, beta2 = value
    except (TypeError, ValueError):
        raise ValueError(f"betas: expected a pair (beta1, beta2), got {value!r}") from None
    return (
        _in_unit_interval("betas[0]", beta1, closed=False),
        _in_unit_interval("betas[1]", beta2, closed=False),
    )


# ---- parameters ---------------------------------------------------------------------------------


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
    if not param.flags.writeable:
        raise ValueError(f"{name}: the array is read-only; an optimizer updates it in place")


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


class Optimizer:
    """Base of the optimizers: the parameters, the hyper-parameters, the step count and the
    per-parameter buffers, with ``zero_grad``, ``state_dict`` and ``load_state_dict``.

    Subclasses name their hyper-parameters in ``_HYPER`` (validated by ``_check_hyper``) and
    their buffers in ``_BUFFERS``, and implement ``_update(i, param, grad)`` for the i-th array.
    """

    _HYPER: tuple = ()
    _BUFFERS: tuple = ()

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
        self._hyper["lr"] = _at_least("lr", value, 0.0)

    @property
    def hyperparameters(self):
        """A copy of the hyper-parameters, as passed to the constructor."""
        return dict(self._hyper)

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
        _check_keys("state_dict", state_dict, ("optimizer", "hyperparameters", "step", "buffers"))
        if state_dict["optimizer"] != type(self).__name__:
            raise ValueError(
                f"state_dict: holds the state of {state_dict['optimizer']!r}, "
                f"not of {type(self).__name__!r}"
            )
        hyper = state_dict["hyperparameters"]
        _check_keys("state_dict['hyperparameters']", hyper, self._HYPER)
        hyper = self._check_hyper(dict(hyper))
        step = _int_at_least("state_dict['step']", state_dict["step"], 0)
        buffers = self._checked_buffers(state_dict["buffers"], step, hyper)
        self._hyper, self._step, self._buffers = hyper, step, buffers

    def _checked_buffers(self, buffers, step, hyper):
        if not hasattr(buffers, "keys"):
            raise TypeError(
                f"state_dict['buffers']: expected a mapping, got {type(buffers).__name__}"
            )
        # all buffers or none: they are created together, by the first step that needs them
        if buffers or (step > 0 and self._needs_buffers(hyper)):
            _check_keys("state_dict['buffers']", buffers, self._BUFFERS)
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
        return {name: [np.zeros(s.param.shape, s.param.dtype) for s in self._slots]
                for name in self._BUFFERS}

    def _check_hyper(self, hyper):  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def _update(self, i, param, grad):  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._hyper.items())
        return f"{type(self).__name__}({len(self._slots)} parameters, {args})"


def _check_keys(where, mapping, expected):
    missing = [k for k in expected if k not in mapping]
    extra = [k for k in mapping if k not in expected]
    if missing:
        raise ValueError(f"{where}: missing key(s) {missing}")
    if extra:
        raise ValueError(f"{where}: unexpected key(s) {extra}")


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, as ``torch.optim.SGD``.

    With ``g`` the gradient (plus ``weight_decay * p``): the momentum buffer is ``b = g`` at the
    first step and ``b = momentum * b + (1 - dampening) * g`` after; the step direction is
    ``g + momentum * b`` (nesterov) or ``b``; ``p -= lr * direction``.

    Parameters
    ----------
    params : module, list of modules, or list of (param, grad) array pairs
    lr : float >= 0
    momentum : float >= 0
    dampening : float in [0, 1]
    weight_decay : float >= 0
        L2 penalty, added to the gradient.
    nesterov : bool
        Needs ``momentum > 0`` and ``dampening == 0``.

    Raises
    ------
    ValueError
        A hyper-parameter out of range, nesterov without momentum or with dampening, an empty
        or repeated parameter, a gradient whose shape differs from its parameter's.
    TypeError
        A parameter that is not a float NumPy array.
    """

    _HYPER = ("lr", "momentum", "dampening", "weight_decay", "nesterov")
    _BUFFERS = ("momentum_buffer",)

    def __init__(self, params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(
            params,
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
        )

    def _check_hyper(self, hyper):
        h = {
            "lr": _at_least("lr", hyper["lr"], 0.0),
            "momentum": _at_least("momentum", hyper["momentum"], 0.0),
            "dampening": _in_unit_interval("dampening", hyper["dampening"], closed=True),
            "weight_decay": _at_least("weight_decay", hyper["weight_decay"], 0.0),
            "nesterov": hyper["nesterov"],
        }
        if not isinstance(h["nesterov"], (bool, np.bool_)):
            raise TypeError(f"nesterov: expected a bool, got {type(h['nesterov']).__name__}")
        h["nesterov"] = bool(h["nesterov"])
        if h["nesterov"] and (h["momentum"] <= 0 or h["dampening"] != 0):
            raise ValueError(
                "nesterov: needs momentum > 0 and dampening == 0, got "
                f"momentum={h['momentum']}, dampening={h['dampening']}"
            )
        return h

    def _needs_buffers(self, hyper):
        return hyper["momentum"] != 0

    def _initial_buffers(self):
        # PyTorch starts the buffer from the first gradient, not from zeros: None until then
        return {"momentum_buffer": [None] * len(self._slots)}

    def _update(self, i, p, g):
        h = self._hyper
        if h["weight_decay"] != 0:
            g = g + h["weight_decay"] * p
        if h["momentum"] != 0:
            bufs = self._buffers["momentum_buffer"]
            buf = bufs[i]
            if buf is None:
                buf = bufs[i] = g.copy()  # g may be the module's own gradient array
            else:
                buf *= h["momentum"]
                buf += (1.0 - h["dampening"]) * g
            g = g + h["momentum"] * buf if h["nesterov"] else buf
        p -= h["lr"] * g


class Adam(Optimizer):
    """Adam, as ``torch.optim.Adam`` (``weight_decay`` is an L2 penalty added to the gradient).

    With ``g`` the gradient (plus ``weight_decay * p``) and ``t`` the step count:
    ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g^2``,
    ``p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)``.

    Parameters
    ----------
    params : module, list of modules, or list of (param, grad) array pairs
    lr : float >= 0
    betas : (float, float), each in [0, 1)
    eps : float >= 0
    weight_decay : float >= 0

    Raises
    ------
    ValueError, TypeError
        As SGD.
    """

    _HYPER = ("lr", "betas", "eps", "weight_decay")
    _BUFFERS = ("exp_avg", "exp_avg_sq")
    _DECOUPLED = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)

    def _check_hyper(self, hyper):
        return {
            "lr": _at_least("lr", hyper["lr"], 0.0),
            "betas": _betas(hyper["betas"]),
            "eps": _at_least("eps", hyper["eps"], 0.0),
            "weight_decay": _at_least("weight_decay", hyper["weight_decay"], 0.0),
        }

    def _update(self, i, p, g):
        h = self._hyper
        lr, (beta1, beta2) = h["lr"], h["betas"]
        t = self._step
        # One fused pass in C++ (m, v and p updated element by element, each operation rounded
        # as torch.optim.Adam orders them); it works on flat contiguous arrays, so a strided
        # parameter is updated through a contiguous copy.
        flat = p.reshape(-1) if p.flags.c_contiguous else np.ascontiguousarray(p).reshape(-1)
        _core.adam_update(flat, np.ascontiguousarray(g).reshape(-1),
                          self._buffers["exp_avg"][i].reshape(-1),
                          self._buffers["exp_avg_sq"][i].reshape(-1), lr, beta1, beta2,
                          h["eps"], h["weight_decay"], self._DECOUPLED,
                          lr / (1.0 - beta1**t), (1.0 - beta2**t) ** 0.5)
        if not np.shares_memory(flat, p):
            p[...] = flat.reshape(p.shape)


class AdamW(Adam):
    """AdamW, as ``torch.optim.AdamW``: Adam with decoupled weight decay, applied to the
    parameter before the update as ``p *= 1 - lr * weight_decay``, never to the gradient.

    Parameters
    ----------
    params, lr, betas, eps
        As Adam.
    weight_decay : float >= 0, default 1e-2
    """

    _DECOUPLED = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


# ---- clipping -----------------------------------------------------------------------------------


def _array_norm(a, norm_type):
    if norm_type == math.inf:
        return np.max(np.abs(a)) if a.size else a.dtype.type(0)
    return np.linalg.norm(a.ravel(), ord=norm_type)


def clip_grad_norm(params, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale all gradients together, in place, so that their global norm is at most
    ``max_norm`` (as ``torch.nn.utils.clip_grad_norm_``).

    The global norm is the ``norm_type``-norm of the gradients' norms (the norm of all entries
    as one vector). When it exceeds ``max_norm`` every gradient is multiplied by
    ``max_norm / (total_norm + 1e-6)``.

    Parameters
    ----------
    params : module, list of modules, or list of (param, grad) array pairs
    max_norm : float >= 0
    norm_type : float > 0 or math.inf
    error_if_nonfinite : bool
        Raise RuntimeError when the total norm is NaN or infinite.

    Returns
    -------
    float
        The total norm before clipping. When it is not finite (and no error was asked for) the
        gradients are left untouched, so a training loop can test the returned value and skip
        the step. PyTorch differs here: it multiplies by the non-finite coefficient, turning
        every gradient into zeros and NaNs.

    Raises
    ------
    ValueError
        ``max_norm`` negative or NaN, ``norm_type`` not positive.
    RuntimeError
        A non-finite total norm with ``error_if_nonfinite``.
    """
    max_norm = _at_least("max_norm", max_norm, 0.0)
    norm_type = _real("norm_type", norm_type)
    if not norm_type > 0:
        raise ValueError(f"norm_type: expected a positive number or inf, got {norm_type!r}")
    grads = _current_grads(_collect(params))
    norms = np.array([_array_norm(g, norm_type) for g in grads], dtype=np.float64)
    total = float(_array_norm(norms, norm_type))
    if not math.isfinite(total):
        if error_if_nonfinite:
            raise RuntimeError(
                f"clip_grad_norm: the total norm of order {norm_type} of the gradients is "
                f"{total}; pass error_if_nonfinite=False to leave them unchanged instead"
            )
        return total
    coef = max_norm / (total + 1e-6)
    if coef < 1.0:
        for g in grads:
            g *= coef
    return total


def clip_grad_value(params, clip_value):
    """Clamp every gradient entry to ``[-clip_value, clip_value]``, in place (as
    ``torch.nn.utils.clip_grad_value_``). NaN entries stay NaN.

    Parameters
    ----------
    params : module, list of modules, or list of (param, grad) array pairs
    clip_value : float >= 0

    Raises
    ------
    ValueError
        ``clip_value`` negative or NaN.
    """
    clip_value = _at_least("clip_value", clip_value, 0.0)
    for g in _current_grads(_collect(params)):
        np.clip(g, -clip_value, clip_value, out=g)


# ---- learning-rate schedules --------------------------------------------------------------------


def _check_optimizer(optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(
            f"optimizer: expected an rnnfast.optim optimizer, got {type(optimizer).__name__}"
        )
    return optimizer


class _Schedule:
    """A schedule that sets ``optimizer.lr`` at each ``step()`` from the epoch count
    ``last_epoch`` (0 after construction) and the current rate, as PyTorch's recursive forms:
    a rate set by hand between steps is carried on, and the values match PyTorch's bit for bit
    rather than a closed form's."""

    def __init__(self, optimizer):
        self.optimizer = _check_optimizer(optimizer)
        self.base_lr = optimizer.lr
        self.last_epoch = 0

    def step(self):
        """Advance one epoch and set the optimizer's learning rate for it."""
        self.last_epoch += 1
        self.optimizer.lr = self._next_lr(self.optimizer.lr)

    def get_last_lr(self):
        """``[lr]``: the rate the last step set (a list, as PyTorch's, of one group)."""
        return [self.optimizer.lr]

    def _next_lr(self, lr):  # pragma: no cover - every subclass overrides it
        raise NotImplementedError


class StepLR(_Schedule):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs
    (``torch.optim.lr_scheduler.StepLR``).

    Parameters
    ----------
    optimizer : Optimizer
    step_size : int >= 1
    gamma : float >= 0
    """

    def __init__(self, optimizer, step_size, gamma=0.1):
        self.step_size = _int_at_least("step_size", step_size, 1)
        self.gamma = _at_least("gamma", gamma, 0.0)
        super().__init__(optimizer)

    def _next_lr(self, lr):
        if self.last_epoch % self.step_size != 0:
            return lr
        return lr * self.gamma


class CosineAnnealingLR(_Schedule):
    """Cosine annealing from the initial rate to ``eta_min`` over ``T_max`` epochs, then back up
    (a period of ``2 T_max``), as ``torch.optim.lr_scheduler.CosineAnnealingLR``:
    ``lr_t = eta_min + (base_lr - eta_min) (1 + cos(pi t / T_max)) / 2``.

    Parameters
    ----------
    optimizer : Optimizer
    T_max : int >= 1
    eta_min : float >= 0
    """

    def __init__(self, optimizer, T_max, eta_min=0.0):
        self.T_max = _int_at_least("T_max", T_max, 1)
        self.eta_min = _at_least("eta_min", eta_min, 0.0)
        super().__init__(optimizer)

    def _next_lr(self, lr):
        t, T, low = self.last_epoch, self.T_max, self.eta_min
        if (t - 1 - T) % (2 * T) == 0:
            # the step off the minimum: the ratio below would divide by 1 + cos(pi) = 0
            return lr + (self.base_lr - low) * (1 - math.cos(math.pi / T)) / 2
        ratio = (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
        return ratio * (lr - low) + low


class ReduceLROnPlateau:
    """Multiply the learning rate by ``factor`` when a metric has stopped improving for more
    than ``patience`` epochs (``torch.optim.lr_scheduler.ReduceLROnPlateau``).

    Parameters
    ----------
    optimizer : Optimizer
    mode : {"min", "max"}
        Whether the metric should go down (a loss) or up (an accuracy).
    factor : float in (0, 1)
    patience : int >= 0
        Epochs without improvement tolerated; the rate drops on the next one.
    threshold : float >= 0
        The least change that counts as an improvement, relative to the best value
        (``threshold_mode="rel"``) or absolute (``"abs"``).
    cooldown : int >= 0
        Epochs after a reduction during which bad epochs are not counted.
    min_lr : float >= 0
        The rate is never reduced below it.
    threshold_mode : {"rel", "abs"}
    eps : float >= 0
        A reduction smaller than this is not applied.

    Call ``step(metric)`` once per epoch.
    """

    def __init__(
        self,
        optimizer,
        mode="min",
        factor=0.1,
        patience=10,
        threshold=1e-4,
        cooldown=0,
        min_lr=0.0,
        threshold_mode="rel",
        eps=1e-8,
    ):
        self.optimizer = _check_optimizer(optimizer)
        if mode not in ("min", "max"):
            raise ValueError(f"mode: expected 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold_mode: expected 'rel' or 'abs', got {threshold_mode!r}")
        factor = _real("factor", factor)
        if not 0.0 < factor < 1.0:
            raise ValueError(f"factor: expected a number in (0, 1), got {factor!r}")
        self.mode, self.threshold_mode, self.factor = mode, threshold_mode, factor
        self.patience = _int_at_least("patience", patience, 0)
        self.threshold = _at_least("threshold", threshold, 0.0)
        self.cooldown = _int_at_least("cooldown", cooldown, 0)
        self.min_lr = _at_least("min_lr", min_lr, 0.0)
        self.eps = _at_least("eps", eps, 0.0)
        self.last_epoch = 0
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0

    def step(self, metric):
        """Record one epoch's metric (any real number, or a 0-d array) and reduce the rate
        when it has not improved for more than ``patience`` epochs."""
        current = float(metric)
        self.last_epoch += 1
        if self._is_better(current):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0

    def get_last_lr(self):
        """``[lr]``: the optimizer's current rate (a list, as PyTorch's, of one group)."""
        return [self.optimizer.lr]

    def _is_better(self, value):
        # NaN compares False, so a NaN metric counts as a bad epoch (as in PyTorch)
        if self.mode == "min":
            limit = (
                self.best * (1.0 - self.threshold)
                if self.threshold_mode == "rel"
                else self.best - self.threshold
            )
            return value < limit
        limit = (
            self.best * (1.0 + self.threshold)
            if self.threshold_mode == "rel"
            else self.best + self.threshold
        )
        return value > limit

    def _reduce(self):
        old = self.optimizer.lr
        new = max(old * self.factor, self.min_lr)
        if old - new > self.eps:
            self.optimizer.lr = new
