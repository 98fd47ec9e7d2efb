"""JSON from files rnnfast did not write: a size cap and a nesting cap checked before parsing,
and JSON's own grammar (no ``NaN`` or ``Infinity``, which Python's json module accepts).

The nesting is measured on the text with the strings taken out, so a hostile document never
reaches the parser's recursion (which raises RecursionError, not ValueError, when it runs out).
"""

from __future__ import annotations

import itertools
import json
import re

__all__ = ["MAX_DEPTH", "loads"]

# save writes a vocabulary 2 deep and a layer's config (a Sequential's layers) 3 deep
MAX_DEPTH = 32

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _refuse_constant(name):
    raise ValueError(f"{name} is not JSON (JSON has no NaN or infinite numbers)")


def loads(data, where, *, max_bytes, max_depth=MAX_DEPTH):
    """The JSON value in ``data`` (bytes in UTF-8, or str).

    Parameters
    ----------
    data : bytes or str
    where : str
        Names the document in messages (``"'vocab.json'"``).
    max_bytes : int
        The most bytes (characters for a str) accepted.
    max_depth : int
        The most nested arrays and objects accepted.

    Raises
    ------
    ValueError
        Longer than ``max_bytes``, nested deeper than ``max_depth``, not UTF-8, not JSON, or a
        ``NaN`` / ``Infinity`` constant; the message starts with ``where``.
    """
    if len(data) > max_bytes:
        raise ValueError(f"{where}: {len(data):,} bytes of JSON, more than the {max_bytes:,} read")
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{where}: not UTF-8 text: {exc}") from None
    brackets = _BRACKETS.findall(_STRING.sub("", data))
    depth = max(itertools.accumulate((_STEP[b] for b in brackets), initial=0))
    if depth > max_depth:
        raise ValueError(
            f"{where}: JSON nested {depth} deep, deeper than the {max_depth} levels read"
        )
    try:
        return json.loads(data, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not valid JSON: {exc}") from None
    except ValueError as exc:  # _refuse_constant's
        raise ValueError(f"{where}: {exc}") from None
