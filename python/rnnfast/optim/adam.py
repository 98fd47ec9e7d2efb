"""Adam and AdamW (torch.optim's rules), the update in rnnfast's fused C++ kernel."""

from __future__ import annotations

import numpy as np

from .. import _core
from .._validation import check_real_at_least, check_real_in, type_error, value_error
from .optimizer import Optimizer

__all__ = ["Adam", "AdamW"]


def _betas(value):
    """The pair (beta1, beta2), each in [0, 1) (torch's rule): a scalar is a TypeError (as
    torch raises), a sequence of another length a ValueError."""
    try:
        beta1, beta2 = value
    except TypeError:
        raise type_error("betas", "a pair (beta1, beta2)", value) from None
    except ValueError:
        raise value_error("betas", "a pair (beta1, beta2)", value) from None
    return (
        check_real_in("betas[0]", beta1, 0, 1, high_open=True),
        check_real_in("betas[1]", beta2, 0, 1, high_open=True),
    )


class Adam(Optimizer):
    """Adam, as ``torch.optim.Adam`` (``weight_decay`` is an L2 penalty added to the gradient).

    With ``g`` the gradient (plus ``weight_decay * p``) and ``t`` the step count:
    ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g^2``,
    ``p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps + epsilon / sqrt(1 -
    beta2^t))``.

    Parameters
    ----------
    params : module, list of modules, or list of (param, grad) array pairs
    lr : float >= 0
    betas : (float, float), each in [0, 1)
    eps : float >= 0
        PyTorch's: added to the bias-corrected ``sqrt(v / (1 - beta2^t))``.
    weight_decay : float >= 0
    epsilon : float >= 0
        Keras's (Kingma and Ba's "epsilon hat"): added to ``sqrt(v)`` before the bias
        correction, so ``keras.optimizers.Adam(epsilon=1e-7)`` is ``Adam(eps=0.0,
        epsilon=1e-7)``; 0 by default.

    Raises
    ------
    ValueError, TypeError
        As SGD.
    """

    _HYPER = ("lr", "betas", "eps", "weight_decay", "epsilon")
    _ADDED_HYPER = {"epsilon": 0.0}  # states saved before Keras's epsilon existed load with it
    _BUFFERS = ("exp_avg", "exp_avg_sq")
    _DECOUPLED = False

    def __init__(
        self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, *, epsilon=0.0
    ):
        super().__init__(
            params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, epsilon=epsilon
        )

    def _check_hyper(self, hyper):
        return {
            "lr": check_real_at_least("lr", hyper["lr"], 0),
            "betas": _betas(hyper["betas"]),
            "eps": check_real_at_least("eps", hyper["eps"], 0),
            "weight_decay": check_real_at_least("weight_decay", hyper["weight_decay"], 0),
            "epsilon": check_real_at_least("epsilon", hyper["epsilon"], 0),
        }

    def _update(self, i, p, g):
        h = self._hyper
        lr, (beta1, beta2) = h["lr"], h["betas"]
        t = self._step
        # One fused pass in C++ (m, v and p updated element by element, each operation rounded
        # as torch.optim.Adam orders them); it works on flat contiguous arrays, so a strided
        # parameter is updated through a contiguous copy.
        flat = p.reshape(-1) if p.flags.c_contiguous else np.ascontiguousarray(p).reshape(-1)
        bias2_sqrt = (1.0 - beta2**t) ** 0.5
        # the kernel adds one epsilon to the bias-corrected root: Keras's, added before the
        # correction, enters it divided by that correction
        eps = h["eps"] + h["epsilon"] / bias2_sqrt
        _core.adam_update(
            flat,
            np.ascontiguousarray(g).reshape(-1),
            self._buffers["exp_avg"][i].reshape(-1),
            self._buffers["exp_avg_sq"][i].reshape(-1),
            lr,
            beta1,
            beta2,
            eps,
            h["weight_decay"],
            self._DECOUPLED,
            lr / (1.0 - beta1**t),
            bias2_sqrt,
        )
        if not np.shares_memory(flat, p):
            p[...] = flat.reshape(p.shape)


class AdamW(Adam):
    """AdamW, as ``torch.optim.AdamW``: Adam with decoupled weight decay, applied to the
    parameter before the update as ``p *= 1 - lr * weight_decay``, never to the gradient.

    Parameters
    ----------
    params, lr, betas, eps, epsilon
        As Adam.
    weight_decay : float >= 0, default 1e-2
    """

    _DECOUPLED = True

    def __init__(
        self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, *, epsilon=0.0
    ):
        super().__init__(
            params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, epsilon=epsilon
        )


# ---- clipping -----------------------------------------------------------------------------------
