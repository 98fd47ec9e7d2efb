"""What every layer does the same way with its parameters (a dict ``_params`` of live arrays
and a dict ``grads`` of gradients under the same names) and its mode (``training``, and the
forward's ``_cache`` that only a training forward keeps).

The recurrent layers keep their weights packed for the kernels between calls (one
``_core.WeightCache`` per layer and direction), so a weight written in place would leave a
stale pack behind. Their parameters are therefore read-only arrays (a :class:`ParameterDict`
freezes what it holds), and every sanctioned writer (:func:`writable_parameters`, the
optimizers, ``load_state_dict``, :meth:`ParameterOwner.parameters_changed`) bumps one global
epoch of the weights, which every layer's caches compare before use; a rebound array is seen
by identity."""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from . import _core

__all__ = [
    "ALIGNMENT",
    "ParameterDict",
    "ParameterOwner",
    "aligned_copy",
    "can_write",
    "parameters_changed",
    "writable_parameters",
    "writing",
]

# Bytes a layer's new parameters are aligned to: a cache line, one AVX-512 vector.
ALIGNMENT = 64


def aligned_copy(array):
    """A C-contiguous copy of ``array`` whose data starts on an ALIGNMENT-byte boundary.

    NumPy aligns its data to 16 bytes. The single-step products (``step()``, a batch of one)
    read the weights as stored, a vector at a time: with rows on 64-byte boundaries no load
    straddles two cache lines (dot products of 192 x 64 and 256 x 64 float32, AVX-512, Zen 4:
    40-47 -> 49-55 GFLOP/s). Only fresh parameters are aligned, before anything holds them:
    arrays a user rebinds, or that a copy or a pickle re-creates, keep NumPy's alignment and
    give the same results, somewhat slower."""
    array = np.ascontiguousarray(array)
    buffer = np.empty(array.nbytes + ALIGNMENT, dtype=np.uint8)
    start = -buffer.ctypes.data % ALIGNMENT
    out = buffer[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


# ---- the weights' epoch --------------------------------------------------------------------------


class _Epoch:
    """The global state every layer's packed-weight caches check: ``value`` grows with every
    sanctioned write of any parameter, and ``open`` counts the writable blocks open now (the
    layers bypass their caches while one is: a loss evaluated inside the block sees the
    values written there)."""

    __slots__ = ("lock", "open", "value")

    def __init__(self):
        self.value = 0
        self.open = 0
        self.lock = threading.Lock()


_EPOCH = _Epoch()


def parameters_changed():
    """Tell every layer that parameter values may have changed in place: each layer's packed
    weights are made again at its next call. What ``layer.parameters_changed()`` does."""
    with _EPOCH.lock:
        _EPOCH.value += 1


def can_write(array):
    """Whether ``array`` is writeable or can be made so (its memory is not read-only): what the
    optimizers accept as a parameter."""
    if array.flags.writeable:
        return True
    try:
        array.flags.writeable = True
    except ValueError:
        return False
    array.flags.writeable = False
    return True


def _arrays_of(objects, where="writable_parameters"):
    """The parameter arrays of ``objects``: layers and containers (their
    ``named_parameters()``), optimizers (their slots), arrays, and lists or tuples of those."""
    out = []
    for obj in objects:
        if isinstance(obj, np.ndarray):
            out.append(obj)
        elif hasattr(obj, "named_parameters"):
            out.extend(p for _, p in obj.named_parameters())
        elif hasattr(obj, "slots"):  # an optimizer: the arrays it updates
            out.extend(slot.param for slot in obj.slots)
        elif isinstance(obj, (list, tuple)):
            out.extend(_arrays_of(obj, where))
        else:
            raise TypeError(
                f"{where}: expected layers, models, optimizers or NumPy arrays, got "
                f"{type(obj).__name__}; pass the layer itself (or layer.parameters())"
            )
    return out


@contextlib.contextmanager
def writing(arrays):
    """Make ``arrays`` writeable for the block, then read-only again (those that were) and bump
    the weights' epoch; while the block is open every layer bypasses its packed weights."""
    flipped = []
    with _EPOCH.lock:
        _EPOCH.open += 1
    try:
        for a in arrays:
            if not a.flags.writeable:
                try:
                    a.flags.writeable = True
                except ValueError:
                    raise ValueError(
                        f"a parameter of shape {a.shape} cannot be made writeable: its memory "
                        "is read-only (a view of a read-only buffer); rebind the parameter to "
                        "a copy (layer.load_state_dict(...) or layer._params[name] = a.copy())"
                    ) from None
                flipped.append(a)
        yield
    finally:
        for a in flipped:
            a.flags.writeable = False
        with _EPOCH.lock:
            _EPOCH.open -= 1
            _EPOCH.value += 1


def writable_parameters(*objects):
    """A context manager in which the parameters of ``objects`` may be written in place.

    The recurrent layers hand their parameters out read-only, because they keep their
    weights packed for the kernels between calls: an in-place write outside this block
    raises ``ValueError: assignment destination is read-only`` instead of leaving the packed
    copy stale. Inside the block the arrays are writeable and every layer computes from the
    arrays themselves (a loss evaluated inside sees the values written there: finite
    differences work); on leaving it they are read-only again and every layer packs its
    weights anew at its next call. The optimizers, ``load_state_dict`` and
    ``rnnfast.distributed.broadcast_parameters`` do this themselves.

    Parameters
    ----------
    *objects : layers, models, optimizers, NumPy arrays, or lists of them
        Whose parameters become writeable (a model's: all of its layers'). Arrays that were
        writeable before stay writeable after.

    Raises
    ------
    TypeError
        Something that holds no parameters.
    ValueError
        An array whose memory is read-only (it cannot be made writeable).

    Examples
    --------
    >>> import numpy as np, rnnfast
    >>> rnn = rnnfast.RNN(3, 4, seed=0)
    >>> with rnnfast.writable_parameters(rnn):
    ...     rnn.parameters()[0][:] = 0.5
    """
    return writing(_arrays_of(objects))


# ---- the parameters' mapping ---------------------------------------------------------------------


def _frozen(value):
    """``value`` read-only. An array over memory NumPy does not own (a torch tensor's, the
    bytes of a pickle) is frozen through a view of it: NumPy never lets writes over a foreign
    buffer be re-enabled once cleared, and a parameter must stay writeable through the
    sanctioned writers."""
    if isinstance(value, np.ndarray) and value.flags.writeable:
        if value.base is not None and not isinstance(value.base, np.ndarray):
            value = value.view()
        value.flags.writeable = False
    return value


class ParameterDict(dict):
    """A layer's parameters by name, each array read-only: what the recurrent layers hold as
    ``_params``. Storing an array freezes it (the array object itself: an in-place write then
    raises); a copy, a deep copy or a pickle of a layer restores them frozen, since they are
    stored through ``__setitem__`` again."""

    __slots__ = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, value in self.items():
            frozen = _frozen(value)
            if frozen is not value:
                super().__setitem__(name, frozen)

    def __setitem__(self, name, value):
        super().__setitem__(name, _frozen(value))

    def update(self, *args, **kwargs):
        for name, value in dict(*args, **kwargs).items():
            self[name] = value

    def setdefault(self, name, default=None):
        if name not in self:
            self[name] = default
        return self[name]

    def __reduce__(self):
        return (type(self), (dict(self),))


class _Caches:
    """A layer's packed-weight caches: per direction index (``k * dirs + direction``) a
    ``[WeightCache, names, arrays]`` entry, valid for the epoch ``epoch``."""

    __slots__ = ("entries", "epoch")

    def __init__(self, epoch):
        self.epoch = epoch
        self.entries = {}


class ParameterOwner:
    """Mixin for layers that keep ``self._params``, ``self.grads``, ``self.training`` and
    ``self._cache``."""

    def parameters_changed(self):
        """Say that parameter values were written in place outside the sanctioned writers
        (:func:`rnnfast.writable_parameters`, the optimizers, ``load_state_dict``): after
        ``p.flags.writeable = True`` and a write, say. The layers' packed weights are made
        again at their next call. Returns the layer."""
        parameters_changed()
        return self

    def writable_parameters(self):
        """``rnnfast.writable_parameters(self)``: a context manager in which this layer's
        parameters may be written in place (see :func:`rnnfast.writable_parameters`)."""
        return writable_parameters(self)

    def _weight_cache(self, k, direction):
        """The packed-weight cache (``_core.WeightCache``) of stacked layer ``k``'s direction
        ``direction`` (0 forward, 1 reverse) for the kernels' ``weight_cache=``: valid (the
        weights' epoch unchanged since it was filled and the live arrays the same objects) or
        freshly cleared; None while a writable block is open (the kernels then pack as
        they go). The torch bridge installs a hook of its own (``_weight_cache_hook``)."""
        state = _EPOCH
        if state.open:
            return None
        d = self.__dict__
        hook = d.get("_weight_cache_hook")
        if hook is not None:
            return hook(k, direction)
        caches = d.get("_weight_caches")
        if caches is None or caches.epoch != state.value:
            caches = self._fresh_caches(caches, state.value)
        idx = k * (2 if getattr(self, "bidirectional", False) else 1) + direction
        entry = caches.entries.get(idx)
        if entry is None:
            entry = caches.entries[idx] = self._cache_entry(k, direction, idx)
        params, held = self._params, entry[2]
        for name, array in zip(entry[1], held):
            if params[name] is not array:  # rebound: new arrays, perhaps at a freed address
                entry[0].clear()
                entry[2] = tuple(params[n] for n in entry[1])
                break
        return entry[0]

    def _fresh_caches(self, caches, epoch):
        """The caches emptied for ``epoch`` (the weights may have changed since): the same
        WeightCache objects, cleared. Old layers' plain dicts of parameters are frozen here."""
        if type(self._params) is dict:
            self._params = ParameterDict(self._params)
        if caches is None:
            caches = self.__dict__["_weight_caches"] = _Caches(epoch)
        for entry in caches.entries.values():
            entry[0].clear()
            entry[2] = tuple(self._params[n] for n in entry[1])
        caches.epoch = epoch
        return caches

    def _cache_entry(self, k, direction, idx):
        """A new entry for direction ``idx``: the names of the parameters of (layer ``k``,
        ``direction``), which the identity check reads."""
        names = getattr(self, "_names", None)
        dirs = 2 if getattr(self, "bidirectional", False) else 1
        if names is None:  # a one-step cell: all of its parameters
            if (k, direction) != (0, 0):
                raise ValueError(
                    f"_weight_cache: a {type(self).__name__} has one layer and one direction, "
                    f"got layer {k}, direction {direction}"
                )
            own = tuple(self._params)
        else:
            if not (0 <= direction < dirs and 0 <= idx < len(names)):
                raise ValueError(
                    f"_weight_cache: expected layer k in [0, {len(names) // dirs}) and "
                    f"direction in [0, {dirs}), got k={k}, direction={direction}"
                )
            suffix = names[idx][0][len("weight_ih") :]  # "_l{k}" or "_l{k}_reverse"
            own = tuple(n for n in self._params if n.endswith(suffix))
        return [_core.WeightCache(), own, tuple(self._params[n] for n in own)]

    def __getstate__(self):
        # the packed weights are the process's own (and rebuilt at the next call); the torch
        # bridge's hook belongs to its module
        state = dict(self.__dict__)
        state.pop("_weight_caches", None)
        state.pop("_weight_cache_hook", None)
        return state

    def parameters(self):
        """The live parameter arrays, in state_dict order (optimizers update them in place)."""
        return list(self._params.values())

    def named_parameters(self):
        return list(self._params.items())

    def zero_grad(self):
        for g in self.grads.values():
            g.fill(0)

    def state_dict(self):
        """Copies of the parameters under their names (PyTorch's, for RNN)."""
        return {name: p.copy() for name, p in self._params.items()}

    def load_state_dict(self, state_dict):
        """Copy values into the live parameters (PyTorch tensors too), in the layer's dtype.
        Checks every key, dtype kind and shape first; on an error nothing changes."""
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"state_dict: expected a mapping, got {type(state_dict).__name__}")
        missing = [k for k in self._params if k not in state_dict]
        extra = [k for k in state_dict if k not in self._params]
        if missing or extra:
            raise ValueError(f"state_dict: missing key(s) {missing}, unexpected key(s) {extra}")
        load_checked(self._params, state_dict)

    def train(self, mode=True):
        """Training mode (forwards keep what backward needs) or, with False, eval mode."""
        self.training = bool(mode)
        if not self.training:
            self._cache = None
        return self

    def eval(self):
        return self.train(False)


def load_checked(params, state_dict):
    """Copy ``state_dict[name]`` (a NumPy array, a torch tensor or anything ``np.asarray`` takes)
    into each live array ``params[name]``, in its dtype, once every value's dtype kind and shape
    are checked: on an error nothing changes. The keys are the caller's to check."""
    loaded = {}
    for name, current in params.items():
        value = state_dict[name]
        if hasattr(value, "detach"):  # a torch tensor: no autograd, on the CPU
            value = value.detach().cpu().numpy()
        arr = np.asarray(value)
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"{name}: expected a real numeric array, got dtype {arr.dtype}")
        if arr.shape != current.shape:
            raise ValueError(f"{name}: expected shape {current.shape}, got shape {arr.shape}")
        loaded[name] = np.array(arr, dtype=current.dtype)
    with writing([params[name] for name in loaded]):
        for name, arr in loaded.items():
            params[name][...] = arr
