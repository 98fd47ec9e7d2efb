"""RMSprop (torch.optim.RMSprop's rule, and Keras's epsilon by its own keyword)."""

from __future__ import annotations

import numpy as np

from .._validation import check_bool, check_real_at_least
from .optimizer import Optimizer

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop, as ``torch.optim.RMSprop`` (``weight_decay`` an L2 penalty on the gradient).

    With ``g`` the gradient (plus ``weight_decay * p``): ``v = alpha v + (1 - alpha) g^2``;
    centered, also ``a = alpha a + (1 - alpha) g`` and ``v~ = v - a^2`` (else ``v~ = v``);
    ``d = sqrt(v~ + epsilon) + eps``; with momentum ``b = momentum b + g / d`` and
    ``p -= lr b``, else ``p -= lr g / d``.

    Parameters
    ----------
    params : module, list of modules, or list of (param, grad) array pairs
    lr : float >= 0
    alpha : float >= 0
        The decay of the squared-gradient average (Keras's ``rho``).
    eps : float >= 0
        PyTorch's: added to the square root.
    weight_decay, momentum : float >= 0
    centered : bool
        Divide by the estimated variance of the gradient instead of its second moment.
    epsilon : float >= 0
        Keras's: added under the square root (``keras.optimizers.RMSprop(epsilon=1e-7)`` is
        ``RMSprop(lr=1e-3, alpha=0.9, eps=0.0, epsilon=1e-7)``); 0 by default.

    Raises
    ------
    ValueError, TypeError
        As SGD.
    """

    _HYPER = ("lr", "alpha", "eps", "weight_decay", "momentum", "centered", "epsilon")
    _BUFFERS = ("square_avg", "grad_avg", "momentum_buffer")

    def __init__(
        self,
        params,
        lr=1e-2,
        alpha=0.99,
        eps=1e-8,
        weight_decay=0.0,
        momentum=0.0,
        centered=False,
        *,
        epsilon=0.0,
    ):
        super().__init__(
            params,
            lr=lr,
            alpha=alpha,
            eps=eps,
            weight_decay=weight_decay,
            momentum=momentum,
            centered=centered,
            epsilon=epsilon,
        )

    def _check_hyper(self, hyper):
        return {
            "lr": check_real_at_least("lr", hyper["lr"], 0),
            "alpha": check_real_at_least("alpha", hyper["alpha"], 0),
            "eps": check_real_at_least("eps", hyper["eps"], 0),
            "weight_decay": check_real_at_least("weight_decay", hyper["weight_decay"], 0),
            "momentum": check_real_at_least("momentum", hyper["momentum"], 0),
            "centered": check_bool("centered", hyper["centered"]),
            "epsilon": check_real_at_least("epsilon", hyper["epsilon"], 0),
        }

    def _update(self, i, p, g):
        h = self._hyper
        alpha = h["alpha"]
        if h["weight_decay"] != 0:
            g = g + h["weight_decay"] * p
        v = self._buffers["square_avg"][i]
        v *= alpha
        v += (1.0 - alpha) * (g * g)
        if h["centered"]:
            a = self._buffers["grad_avg"][i]
            a += (1.0 - alpha) * (g - a)  # torch's lerp
            denom = v - a * a
        else:
            denom = v
        if h["epsilon"] != 0:
            denom = denom + h["epsilon"]
        denom = np.sqrt(denom)
        if h["eps"] != 0:
            denom += h["eps"]
        if h["momentum"] > 0:
            b = self._buffers["momentum_buffer"][i]
            b *= h["momentum"]
            b += g / denom
            p -= h["lr"] * b
        else:
            p -= h["lr"] * (g / denom)
