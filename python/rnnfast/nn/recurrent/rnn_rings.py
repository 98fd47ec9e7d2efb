"""The state a dilated recurrent layer carries: per (layer, direction) its last d states, a ring
(d, B, S) in age order (nn.recurrent.dilation), S the cell's joined state width (nn.recurrent.cells: H, or an
LSTM's h and c side by side, R + H). It is what ``step`` takes and returns and what a stateful
dilated layer carries from one call to the next, and a forward takes it as ``h0``: one initial
state per interleaved chain. An undilated layer of a dilated stack has a ring of one.

The API's ring form: for the Elman and GRU layers a list (or tuple) of one ring (d_k, B, H)
per (layer, direction); for the LSTM the pair ``(h, c)`` as always, each part such a list, of
rings (d_k, B, R) and (d_k, B, H) (``nn.recurrent.gated``).
"""

from __future__ import annotations

import numpy as np

from ..._validation import as_float_array

__all__ = [
    "broadcast_rings",
    "is_dilated",
    "map_state",
    "ring_arg",
    "ring_sizes",
    "rings_input",
    "zero_rings",
]


def map_state(fn, state):
    """``fn`` applied to a state array, or to each ring of a list of them (a list back)."""
    if state is None:
        return None
    if isinstance(state, list):
        return [fn(ring) for ring in state]
    return fn(state)


def is_dilated(layer):
    return any(d > 1 for d in layer._dilations)


def ring_sizes(layer, directions):
    """One ring size per (layer, direction): the layer's dilation."""
    return [d for d in layer._dilations for _ in range(directions)]


def rings_input(layer, name, value, batch, directions, unbatched=False):
    """A state argument in the ring form, checked, as the runner takes it (a list of
    rings (d_i, B, S)); None when ``value`` is not in the ring form (a plain state or
    None, for the caller's other checks). The Elman and GRU layers' ring form: a list (or
    tuple) of rings, for a dilated layer; the LSTM's overrides this."""
    if not (isinstance(value, (list, tuple)) and is_dilated(layer)):
        return None
    return ring_arg(layer, name, value, batch, directions, unbatched)


def ring_arg(layer, name, value, batch, directions, unbatched=False, width=None, what="H"):
    """A list or tuple of rings, one per (layer, direction), checked: ring i (d_i, B, W),
    or (d_i, W) for unbatched input (returned as (d_i, 1, W)); W is ``width`` (named
    ``what`` in messages), by default the cell's joined state width. A list of arrays,
    the caller's where their dtype and layout allow."""
    sizes = ring_sizes(layer, directions)
    where = "num_layers*dirs" if directions == 2 else "num_layers"
    if not isinstance(value, (list, tuple)):
        raise TypeError(
            f"{name}: a dilated layer's ring state is a list of one ring (d, B, {what}) per "
            f"(layer, direction), {where} = {len(sizes)} of them, got {type(value).__name__}"
        )
    if len(value) != len(sizes):
        raise ValueError(
            f"{name}: a dilated layer's state is one ring (d, B, {what}) per (layer, "
            f"direction), {where} = {len(sizes)} of them (dilations "
            f"{list(layer._dilations)}), got a {type(value).__name__} of {len(value)}"
        )
    W = layer.cell.state_width(layer) if width is None else width
    rings = []
    for i, (ring, d) in enumerate(zip(value, sizes)):
        arr = as_float_array(f"{name}[{i}]", ring, layer.dtype)
        expected = (d, W) if unbatched else (d, batch, W)
        # the short form (nn.recurrent.dilation): m <= d entries, ring[0] standing for the oldest
        if arr.ndim != len(expected) or arr.shape[1:] != expected[1:] or not 1 <= len(arr) <= d:
            layout = f"(d, {what}) with unbatched input" if unbatched else f"(d, B, {what})"
            raise ValueError(
                f"{name}[{i}]: expected the ring {layout} = {expected} (layer "
                f"{i // directions}'s dilation d = {d}), or a shorter one of m entries, "
                f"1 <= m <= d, whose first stands for the d - m + 1 oldest; got shape "
                f"{arr.shape}"
            )
        rings.append(arr[:, None] if unbatched else arr)
    return rings


def broadcast_rings(layer, h):
    """Rings from one state per layer (num_layers, B, S): every chain starts from it, a
    ring of one in the short form (nn.recurrent.dilation; views, no copy)."""
    return [h[k][None] for k in range(len(layer._dilations))]


def zero_rings(layer, batch):
    """Rings of zeros, one entry each (the short form, nn.recurrent.dilation): a ring grows as steps
    arrive, to at most its dilation."""
    shape = (1, batch, layer.cell.state_width(layer))
    return [np.zeros(shape, dtype=layer.dtype) for _ in layer._dilations]
