"""The state a dilated RNN layer carries: per (layer, direction) its last d states, a ring
(d, B, H) in age order (nn.dilation). It is what ``step`` takes and returns and what a
stateful layer carries from one call to the next, and a forward takes it as ``h0``: one
initial state per interleaved chain. An undilated layer of a dilated stack has a ring of one.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_float_array

__all__ = ["RNNRings", "map_state"]


def map_state(fn, state):
    """``fn`` applied to a state array, or to each ring of a list of them (a list back)."""
    if state is None:
        return None
    if isinstance(state, list):
        return [fn(ring) for ring in state]
    return fn(state)


class RNNRings:
    """Mixin of rnnfast.RNN: checks and builds the rings of a dilated layer."""

    def _is_dilated(self):
        return any(d > 1 for d in self._dilations)

    def _ring_sizes(self, directions):
        """One ring size per (layer, direction): the layer's dilation."""
        return [d for d in self._dilations for _ in range(directions)]

    def _ring_arg(self, name, value, batch, directions, unbatched=False):
        """A list or tuple of rings, one per (layer, direction), checked: ring i (d_i, B, H),
        or (d_i, H) for unbatched input (returned as (d_i, 1, H)). A list of arrays, the
        caller's where their dtype and layout allow."""
        sizes = self._ring_sizes(directions)
        where = "num_layers*dirs" if directions == 2 else "num_layers"
        if len(value) != len(sizes):
            raise ValueError(
                f"{name}: a dilated layer's state is one ring (d, B, H) per (layer, direction), "
                f"{where} = {len(sizes)} of them (dilations {list(self._dilations)}), got a "
                f"{type(value).__name__} of {len(value)}"
            )
        H = self.hidden_size
        rings = []
        for i, (ring, d) in enumerate(zip(value, sizes)):
            arr = as_float_array(f"{name}[{i}]", ring, self.dtype)
            expected = (d, H) if unbatched else (d, batch, H)
            if arr.shape != expected:
                layout = "(d, H) with unbatched input" if unbatched else "(d, B, H)"
                raise ValueError(
                    f"{name}[{i}]: expected the ring {layout} = {expected} (layer "
                    f"{i // directions}'s dilation d = {d}), got shape {arr.shape}"
                )
            rings.append(arr[:, None] if unbatched else arr)
        return rings

    def _broadcast_rings(self, h):
        """Rings from one state per layer (num_layers, B, H): every chain starts from it
        (read-only views, no copy)."""
        return [np.broadcast_to(h[k], (d,) + h.shape[1:]) for k, d in enumerate(self._dilations)]

    def _zero_rings(self, batch):
        shape = (batch, self.hidden_size)
        return [np.zeros((d,) + shape, dtype=self.dtype) for d in self._dilations]
