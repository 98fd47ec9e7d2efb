"""Argument checks shared by the data helpers: flags, choices and integers, each error naming the
argument, what it expects and what it got."""

from __future__ import annotations

import numbers

import numpy as np


def check_flag(name: str, value) -> bool:
    """``value`` as a bool; TypeError for anything else (1, "yes", None), so a typo is not
    silently read as True."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def check_choice(name: str, value, choices: tuple[str, ...]):
    """``value`` when it is one of ``choices``, else ValueError listing them."""
    if not isinstance(value, str) or value not in choices:
        listed = " or ".join(repr(c) for c in choices)
        raise ValueError(f"{name}: expected {listed}, got {value!r}")
    return value


def check_int(name: str, value, minimum: int) -> int:
    """``value`` as an int >= ``minimum``: TypeError for a non-integer (bools included, and
    floats such as 32.0, which usually mean a computation went wrong), ValueError when too small."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an int >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {value}")
    return int(value)


def check_optional_int(name: str, value, minimum: int) -> int | None:
    return None if value is None else check_int(name, value, minimum)
