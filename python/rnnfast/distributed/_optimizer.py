"""DistributedOptimizer: an optimizer whose gradients are averaged over the ranks before each
step, through flat buckets whose reductions start while the layers below are still in their
backward."""

from __future__ import annotations

import time

import numpy as np

from .._validation import check_bool, check_positive_int
from ._communication import get_comm, mpi

__all__ = ["DistributedOptimizer"]


def _transparent(module):
    """A container whose backward only runs each child's once (it says so): its children can
    be hooked."""
    says = getattr(module, "backward_runs_children", None)
    return callable(says) and bool(says())


def _leaf(module, key):
    """(unit, key within it, name of the unit) of a parameter ``key`` of ``module``."""
    path = []
    while _transparent(module):
        for prefix, child in module.named_children():
            if key.startswith(prefix + "."):
                module, key = child, key[len(prefix) + 1 :]
                path.append(prefix)
                break
        else:
            break
    return module, key, ".".join(path)


_NONE = object()


class _Entry:
    """A parameter's place in its dtype's flat buffer."""

    __slots__ = ("slot", "unit", "key", "offset", "size", "bucket")

    def __init__(self, slot, unit, key):
        self.slot, self.unit, self.key = slot, unit, key
        self.offset = self.size = 0
        self.bucket = None


class _Bucket:
    __slots__ = ("index", "view", "entries", "remaining", "request", "units")

    def __init__(self, index, entries):
        self.index = index
        self.entries = entries
        self.view = None
        self.remaining = len(entries)
        self.request = None


class DistributedOptimizer:
    """Wraps an ``rnnfast.optim`` optimizer: gradients averaged over the ranks, then its step.

    The gradients go through one preallocated flat buffer per dtype, cut into buckets of about
    ``bucket_bytes``. The library's containers (Sequential, Module, nested) call each child's
    ``backward`` in turn; the wrapper hooks every leaf child (a layer, or a container with a
    backward of its own): when its backward returns, its gradients are copied into their
    buckets, and a bucket whose last parameter is in starts its ``Iallreduce`` at once, while
    the layers below are still in their backward. :meth:`synchronize` (or :meth:`step`) starts
    the buckets no hook completed, waits for all of them and writes the averaged gradients
    back into the model's gradient arrays; :meth:`step` then runs the wrapped optimizer.

    Buckets take whole layers in backward order (the reverse of the parameter order) up to
    ``bucket_bytes``; a layer larger than that is split by parameters into buckets of its own.

    Where the overlap does not happen (the results are the same; the reduction runs at step
    time instead):

    - a model that is one layer, or a container with a ``backward`` of its own (Seq2Seq,
      JordanRNN, a Module subclass that overrides ``backward``): it is one unit, reduced when
      its backward returns, so nothing overlaps;
    - an Embedding fused into the RNN after it in a Module (``rnn(ids, embedding=emb)``), a
      layer whose output did not reach the loss, a layer that cannot take an instance
      attribute (``__slots__``), parameters given to the optimizer as ``(param, grad)`` pairs;
    - a layer whose backward ran twice before a step (gradient accumulation): the step waits
      and reduces every gradient again from the arrays, so the accumulated sum is averaged.

    How much overlaps depends on the MPI library progressing a started reduction: MPICH does so
    whenever the process calls MPI (each hook tests the open requests); set
    ``MPIR_CVAR_ASYNC_PROGRESS=1`` for a progress thread.

    Change gradients (clipping, penalties) only after :meth:`synchronize`: a hook has already
    copied them, and the averaged values overwrite them.

    Parameters
    ----------
    optimizer : an ``rnnfast.optim.Optimizer`` (SGD, Adam, AdamW ...)
    bucket_bytes : int >= 1
        Target size of a bucket in bytes (256 KiB by default: rnnfast's models are small, and a
        reduction of a single bucket would not overlap anything).
    overlap : bool
        False: no hooks; everything is reduced at step time (blocking ``Allreduce``).
    trace : bool
        Record ``(time, event, detail)`` tuples in ``self.events``: ``"backward_end"`` (unit
        name), ``"iallreduce"`` (bucket index, its units), ``"wait"`` and ``"waited"``.

    Attributes
    ----------
    wait_seconds : float
        Time spent waiting for the reductions to finish, summed over the steps.
    buckets : list of (dtype, bytes, unit names)
    """

    def __init__(self, optimizer, *, bucket_bytes=1 << 18, overlap=True, trace=False):
        if isinstance(optimizer, DistributedOptimizer):
            raise TypeError("optimizer: already a DistributedOptimizer")
        if not hasattr(optimizer, "slots") or not hasattr(optimizer, "step"):
            raise TypeError(
                f"optimizer: expected an rnnfast.optim optimizer, got {type(optimizer).__name__}"
            )
        check_positive_int("bucket_bytes", bucket_bytes)
        check_bool("overlap", overlap)
        check_bool("trace", trace)
        self._comm = get_comm()
        self._MPI = mpi()
        self.optimizer = optimizer
        self.bucket_bytes = int(bucket_bytes)
        self.overlap = overlap
        self.events = [] if trace else None
        self.wait_seconds = 0.0
        self._hooked = []  # units whose backward we wrapped
        self._owners = {}  # unit index -> the container whose child it is
        self._build(optimizer.slots)
        if overlap and self._comm.Get_size() > 1:
            self._install_hooks()
        self._reset()

    # ---- layout ----------------------------------------------------------------------------

    def _build(self, slots):
        units = {}  # id(unit) -> (unit, name, [entries]) in parameter order
        loose = []
        for slot in slots:
            if slot.module is None:
                loose.append(_Entry(slot, None, None))
                continue
            unit, key, name = _leaf(slot.module, slot.key)
            if id(unit) not in units:
                units[id(unit)] = (unit, name or type(unit).__name__, [])
            units[id(unit)][2].append(_Entry(slot, unit, key))
        self._units = list(units.values())[::-1]  # backward order
        self._entries = [e for _, _, entries in self._units for e in entries[::-1]] + loose
        self.buckets = []
        self._buckets = []
        self._buffers = {}
        for dtype in sorted({e.slot.param.dtype.str for e in self._entries}):
            groups = [
                [e for e in entries[::-1] if e.slot.param.dtype.str == dtype]
                for _, _, entries in self._units
            ]
            groups.append([e for e in loose if e.slot.param.dtype.str == dtype])
            self._layout(np.dtype(dtype), [g for g in groups if g])

    def _layout(self, dtype, groups):
        cap = self.bucket_bytes
        buckets, current = [], []

        def nbytes(entries):
            return sum(e.slot.param.nbytes for e in entries)

        for group in groups:
            if nbytes(group) > cap:
                if current:
                    buckets.append(current)
                    current = []
                for e in group:  # a large unit: buckets of its own parameters
                    if current and nbytes(current) + e.slot.param.nbytes > cap:
                        buckets.append(current)
                        current = []
                    current.append(e)
                buckets.append(current)
                current = []
            elif current and nbytes(current) + nbytes(group) > cap:
                buckets.append(current)
                current = list(group)
            else:
                current.extend(group)
        if current:
            buckets.append(current)
        total = sum(nbytes(b) for b in buckets) // dtype.itemsize
        buffer = np.zeros(total, dtype=dtype)
        self._buffers[dtype.str] = buffer
        offset = 0
        for entries in buckets:
            bucket = _Bucket(len(self._buckets), entries)
            start = offset
            for e in entries:
                e.offset, e.size, e.bucket = offset, e.slot.param.size, bucket
                offset += e.size
            bucket.view = buffer[start:offset]
            bucket.units = sorted({self._unit_name(e) for e in entries})
            self._buckets.append(bucket)
            self.buckets.append((dtype.name, bucket.view.nbytes, bucket.units))

    def _unit_name(self, entry):
        for unit, name, _ in self._units:
            if unit is entry.unit:
                return name
        return "(param, grad) pairs"

    # ---- hooks -----------------------------------------------------------------------------

    def _install_hooks(self):
        for index, (unit, _, _) in enumerate(self._units):
            original = unit.backward  # the class's, or an instance attribute already there
            previous = getattr(unit, "__dict__", {}).get("backward", _NONE)

            def backward(*args, _original=original, _index=index, **kwargs):
                result = _original(*args, **kwargs)
                self._unit_done(_index)
                return result

            try:
                object.__setattr__(unit, "backward", backward)
            except (AttributeError, TypeError):
                continue  # no instance attributes: reduced at step time
            self._hooked.append((unit, previous))
        # a container may run a child inside another (Sequential: an Embedding fused into the
        # RNN after it): when that one's backward is done, so is the inner child's
        self._positions = {id(unit): i for i, (unit, _, _) in enumerate(self._units)}
        for owner in self._containers():
            for _, child in owner.named_children():
                if id(child) in self._positions:
                    self._owners[self._positions[id(child)]] = owner

    def _containers(self):
        seen, out = set(), []
        stack = [s.module for s in self.optimizer.slots if s.module is not None]
        while stack:
            m = stack.pop()
            if id(m) in seen or not _transparent(m):
                continue
            seen.add(id(m))
            out.append(m)
            stack.extend(child for _, child in m.named_children())
        return out

    def remove_hooks(self):
        """Unwrap the layers' ``backward`` (before pickling a model, say); reductions then
        all run at step time."""
        for unit, previous in reversed(self._hooked):
            if previous is _NONE:
                unit.__dict__.pop("backward", None)
            else:
                object.__setattr__(unit, "backward", previous)
        self._hooked = []

    def _unit_done(self, index):
        if self.events is not None:
            self.events.append((time.perf_counter(), "backward_end", self._units[index][1]))
        self._mark(index)
        owner = self._owners.get(index)
        if owner is not None:
            for inner in owner.children_run_by(self._units[index][0]):
                if id(inner) in self._positions:
                    self._mark(self._positions[id(inner)])
        if self._active:
            self._MPI.Request.Testall(self._active)  # lets MPICH progress the open ones

    def _mark(self, index):
        unit, _, entries = self._units[index]
        if any(id(e) in self._ready for e in entries):
            self._again = True  # a second backward before the step: reduce all at step time
            return
        if self._again:
            return
        grads = unit.grads
        for e in entries:
            self._copy_in(e, grads[e.key])
            self._ready.add(id(e))
            e.bucket.remaining -= 1
            if e.bucket.remaining == 0:
                self._start(e.bucket)

    def _copy_in(self, e, grad):
        if grad.shape != e.slot.param.shape:
            raise ValueError(
                f"gradient of {e.slot.name}: expected shape {e.slot.param.shape} (the "
                f"parameter's), got shape {grad.shape}"
            )
        buffer = self._buffers[e.slot.param.dtype.str]
        buffer[e.offset : e.offset + e.size] = grad.reshape(-1)

    def _start(self, bucket):
        if self.events is not None:
            self.events.append((time.perf_counter(), "iallreduce", (bucket.index, bucket.units)))
        bucket.request = self._comm.Iallreduce(self._MPI.IN_PLACE, bucket.view, op=self._MPI.SUM)
        self._active.append(bucket.request)

    def _reset(self):
        self._ready = set()
        self._again = False
        self._active = []
        self._synced = False
        for bucket in self._buckets:
            bucket.remaining = len(bucket.entries)
            bucket.request = None

    # ---- the step ----------------------------------------------------------------------------

    def synchronize(self):
        """Average the gradients over the ranks, into the model's gradient arrays (once per
        step; :meth:`step` calls it when it has not run). Every rank must call it."""
        if self._synced:
            return
        size = self._comm.Get_size()
        if size > 1:
            now = dict(zip(map(id, self.optimizer.slots), self.optimizer.current_grads()))
            grads = [now[id(e.slot)] for e in self._entries]
            if self._again:  # start over from the arrays: wait for what was started
                self._wait()
                self._ready = set()
                for bucket in self._buckets:
                    bucket.request = None
            for e, g in zip(self._entries, grads):
                if id(e) not in self._ready:
                    self._copy_in(e, g)
            for bucket in self._buckets:
                if bucket.request is None:
                    self._start(bucket)
            self._wait()
            for e, g in zip(self._entries, grads):
                view = self._buffers[e.slot.param.dtype.str][e.offset : e.offset + e.size]
                np.divide(view, size, out=view)
                g[...] = view.reshape(g.shape)
        self._synced = True

    def _wait(self):
        if self.events is not None:
            self.events.append((time.perf_counter(), "wait", len(self._active)))
        start = time.perf_counter()
        self._MPI.Request.Waitall(self._active)
        self.wait_seconds += time.perf_counter() - start
        self._active = []
        if self.events is not None:
            self.events.append((time.perf_counter(), "waited", None))

    def step(self):
        """:meth:`synchronize`, then the wrapped optimizer's step."""
        self.synchronize()
        try:
            self.optimizer.step()
        finally:
            self._reset()

    def skip_step(self):
        """End a step without updating (a non-finite norm after synchronize, say): every rank
        must skip it together."""
        self.synchronize()
        self._reset()

    def zero_grad(self):
        """The wrapped optimizer's zero_grad; a step that was started and not taken is
        finished first (its reductions awaited), so every rank stays in step."""
        if self._active:
            self._wait()
        self._reset()
        self.optimizer.zero_grad()

    @property
    def lr(self):
        return self.optimizer.lr

    @lr.setter
    def lr(self, value):
        self.optimizer.lr = value

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict):
        self.optimizer.load_state_dict(state_dict)

    def __getattr__(self, name):  # hyperparameters, step_count, ...
        if name == "optimizer":
            raise AttributeError(name)
        return getattr(self.optimizer, name)

    def __repr__(self):
        return (
            f"DistributedOptimizer({self.optimizer!r}, {len(self._buckets)} buckets, "
            f"{self._comm.Get_size()} ranks)"
        )
