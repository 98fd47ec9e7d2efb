"""The optimizers' argument checks: each names the argument, the expected and the received value."""

from __future__ import annotations

import numbers


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
