"""SGD with momentum, dampening, Nesterov and weight decay (torch.optim.SGD's rule)."""

from __future__ import annotations

from .._validation import check_bool, check_real_at_least, check_real_in
from .optimizer import Optimizer

__all__ = ["SGD"]


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
            "lr": check_real_at_least("lr", hyper["lr"], 0),
            "momentum": check_real_at_least("momentum", hyper["momentum"], 0),
            "dampening": check_real_in("dampening", hyper["dampening"], 0, 1),
            "weight_decay": check_real_at_least("weight_decay", hyper["weight_decay"], 0),
            "nesterov": check_bool("nesterov", hyper["nesterov"]),
        }
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
