"""The torch bridge's packed-weight caches (``rnnfast.torch``): one ``_core.WeightCache`` per
layer and direction of a module, valid while every weight tensor it was filled from is the
same tensor with the same ``(_version, data_ptr())``. torch bumps a tensor's ``_version`` at
every in-place operation (an optimizer's step, ``with torch.no_grad(): w.copy_(...)``,
``load_state_dict``), and ``data_ptr()`` changes when ``w.data`` is replaced (``.double()``,
``.to()``); the tensors are held, so their memory cannot be reused by others meanwhile.

What neither sees is a write through ``w.data`` (a tensor with a version counter of its own):
PyTorch's own word_language_model example updates its weights so (``p.data.add_(...)``), and
torch.autograd.gradcheck perturbs its inputs so. So a forward also checks the weights' bytes
(``_core.weights_fingerprint``: one read of them, a third of what the packs it keeps cost to
remake), and a backward, which reads what its forward packed, trusts its forward's check (as
torch's own backward reads its saved weights, written through ``.data`` or not).
``parameters_changed()`` drops the packs at once.
"""

from __future__ import annotations

import weakref

from . import _core

__all__ = ["LayerHook", "bridge_cache", "clear_caches"]

# where a module keeps its caches (rnnfast.torch drops "_rnnfast_" attributes when pickled)
_ATTRIBUTE = "_rnnfast_weight_caches"


def _state(tensors):
    return tuple((t._version, t.data_ptr()) for t in tensors)


def _fingerprint(tensors):
    """The weights' bytes as one number, or None where a tensor is not a dense CPU array the
    kernels read as it is (then nothing is cached)."""
    try:
        views = [t.detach().numpy() for t in tensors]
    except (RuntimeError, TypeError):
        return None
    if not all(v.flags.c_contiguous for v in views):
        return None
    return _core.weights_fingerprint(views)


def bridge_cache(module, idx, tensors, contents=True):
    """The cache of direction ``idx`` (``k * dirs + d``) of ``module`` for the weight tensors
    ``tensors`` (that direction's, in a fixed order): valid, or freshly cleared when one of
    them is another tensor, or was written or moved since the cache was filled; with
    ``contents`` (a forward) also when their bytes changed. None where the bytes cannot be
    read as they are."""
    caches = module.__dict__.get(_ATTRIBUTE)
    if caches is None:
        caches = module.__dict__[_ATTRIBUTE] = {}
    entry = caches.get(idx)
    state = _state(tensors)
    bytes_now = _fingerprint(tensors) if contents or entry is None else entry[3]
    if bytes_now is None:
        return None
    if entry is None:
        entry = caches[idx] = [_core.WeightCache(), tensors, state, bytes_now]
    elif (
        entry[2] != state
        or entry[3] != bytes_now
        or len(entry[1]) != len(tensors)
        or any(a is not b for a, b in zip(entry[1], tensors))
    ):
        entry[0].clear()
        entry[1], entry[2], entry[3] = tensors, state, bytes_now
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
