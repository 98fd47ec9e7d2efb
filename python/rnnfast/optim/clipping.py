"""Gradient clipping by global norm or by value, in place."""

from __future__ import annotations

import math

import numpy as np

from .._validation import check_real, check_real_at_least
from ._params import _collect, _current_grads

__all__ = ["clip_grad_norm", "clip_grad_value"]


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
    max_norm = check_real_at_least("max_norm", max_norm, 0)
    norm_type = check_real("norm_type", norm_type)
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
    clip_value = check_real_at_least("clip_value", clip_value, 0)
    for g in _current_grads(_collect(params)):
        np.clip(g, -clip_value, clip_value, out=g)


# ---- learning-rate schedules --------------------------------------------------------------------
