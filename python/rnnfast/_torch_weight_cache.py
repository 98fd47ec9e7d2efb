"""The torch bridge's packed-weight caches (``rnnfast.torch``): one ``_core.WeightCache`` per
layer and direction of a module, valid while every weight tensor it was filled from is the
same tensor with the same ``(_version, data_ptr())``. torch bumps a tensor's ``_version`` at
every in-place operation (an optimizer's step, ``with torch.no_grad(): w.copy_(...)``,
``load_state_dict``), and ``data_ptr()`` changes when ``w.data`` is replaced (``.double()``,
``.to()``); the tensors are held, so their memory cannot be reused by others meanwhile.

What neither sees is a write through ``w.data`` (a tensor with a version counter of its own,
which autograd's check of saved tensors misses as well): after one, call the module's
``parameters_changed()``.
"""

from __future__ import annotations

import weakref

from . import _core

__all__ = ["LayerHook", "bridge_cache", "clear_caches"]

# where a module keeps its caches (rnnfast.torch drops "_rnnfast_" attributes when pickled)
_ATTRIBUTE = "_rnnfast_weight_caches"


def _state(tensors):
    return tuple((t._version, t.data_ptr()) for t in tensors)


def bridge_cache(module, idx, tensors):
    """The cache of direction ``idx`` (``k * dirs + d``) of ``module`` for the weight tensors
    ``tensors`` (that direction's, in a fixed order): valid, or freshly cleared when one of
    them is another tensor, or was written or moved since the cache was filled."""
    caches = module.__dict__.get(_ATTRIBUTE)
    if caches is None:
        caches = module.__dict__[_ATTRIBUTE] = {}
    entry = caches.get(idx)
    state = _state(tensors)
    if entry is None:
        entry = caches[idx] = [_core.WeightCache(), tensors, state]
    elif (
        entry[2] != state
        or len(entry[1]) != len(tensors)
        or any(a is not b for a, b in zip(entry[1], tensors))
    ):
        entry[0].clear()
        entry[1], entry[2] = tensors, state
    return entry[0]


def clear_caches(module):
    """Drop every pack of ``module``'s caches: the next call packs anew."""
    for entry in module.__dict__.get(_ATTRIBUTE, {}).values():
        entry[0].clear()


class LayerHook:
    """The ``_weight_cache_hook`` of the rnnfast layer a bridge module runs its general route
    on: the layer asks it for (layer ``k``, direction ``d``)'s cache, which the module keeps
    for the weight tensors bound for the call (``weights``, set at every bind). The module is
    held weakly (it holds the layer)."""

    __slots__ = ("_module", "weights")

    def __init__(self, module):
        self._module = weakref.ref(module)
        self.weights = ()

    def __call__(self, k, d):
        module = self._module()
        if module is None or not self.weights:
            return None
        idx = k * (2 if module.bidirectional else 1) + d
        rows = module._direction_rows()
        return bridge_cache(module, idx, tuple(self.weights[i] for i in rows[idx]))
