"""Data-parallel training over MPI (mpi4py): every rank holds a copy of the model, trains on its
shard of each global batch, and the ranks average their gradients before each optimizer step.

Install the runtime with ``pip install "rnnfast[mpi]"`` (mpi4py and MPICH from PyPI) and run a
script under ``mpiexec -n 4 python train.py``; mpi4py is imported here only, when ``init()`` runs.

A training loop of one's own::

    from rnnfast import distributed as dist, optim

    dist.init()                                    # MPI.COMM_WORLD
    rnnfast.set_num_threads(1)                     # one rank per core on one machine
    model = build_model()
    opt = dist.DistributedOptimizer(optim.Adam(model, lr=1e-3))
    dist.broadcast_parameters(model)               # every rank starts from rank 0's weights
    dist.broadcast_optimizer_state(opt)
    sampler = dist.DistributedSampler(len(x), batch_size=32, seed=0)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for index in sampler:                      # this rank's part of each global batch
            model.zero_grad()
            value, d_out = losses.cross_entropy(model(x[index]), y[index])
            model.backward(d_out)                  # buckets reduced while lower layers run
            opt.synchronize()                      # averaged gradients in model.grads
            optim.clip_grad_norm(model, 1.0)       # the global norm: of the averaged gradients
            opt.step()

or :func:`fit` / :func:`fit_stream`, which do all of this (and average the losses and metrics,
print and checkpoint on rank 0 only) with the arguments of ``training.fit`` / ``fit_stream``.

N ranks on the N equal parts of a global batch take the step one process takes on the whole
batch (the mean loss's gradient is the mean of the parts' mean gradients), to float rounding.

Dropout: :func:`seed_dropout` (which :func:`fit` and :func:`fit_stream` call) gives every
dropout generator of the model a stream of its own on each rank, drawn from
``(seed, rank, the generator's position in the model)``. What is guaranteed:

- a run repeats: the same seed, number of ranks and data give bitwise the same masks, steps
  and parameters on every run (rnnfast's results do not depend on the thread count);
- the ranks' masks differ (independent streams), and the parameters stay the same on every
  rank (the gradients are averaged as without dropout);
- with every dropout probability 0 (or in eval mode) no mask is drawn and N ranks equal one
  process on the whole batch as above.

With dropout N ranks do *not* equal one process on the whole batch: that process draws one
mask for the whole batch from one stream, and its rows are not the ranks' masks. A step is
one of the same expected value (the masks have the same distribution), not the same numbers.
"""

from __future__ import annotations

import math
import sys
import time
import traceback

import numpy as np

from . import training as _training
from ._validation import check_bool, check_int, check_positive_int
from .data.batching import BucketedBatches
from .nn.dropout import Dropout
from .nn.module import Module
from .nn.sequential import Sequential
from .optim import clip_grad_norm
from .optim._params import _current_grads

__all__ = [
    "DistributedOptimizer",
    "DistributedSampler",
    "average",
    "broadcast_optimizer_state",
    "broadcast_parameters",
    "fit",
    "fit_stream",
    "get_comm",
    "init",
    "is_initialized",
    "rank",
    "seed_dropout",
    "size",
]

_COMM = None  # the communicator of init()
_MPI = None  # the mpi4py.MPI module, once imported


def _mpi():
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except ImportError as error:
            raise ImportError(
                "rnnfast.distributed needs mpi4py and an MPI runtime: pip install 'rnnfast[mpi]' "
                "(mpi4py and mpich)"
            ) from error
        _MPI = MPI
    return _MPI


# ---- the communicator ---------------------------------------------------------------------------


def init(comm=None, *, abort_on_error=True):
    """Start data-parallel training on ``comm`` (``MPI.COMM_WORLD`` by default); returns it.

    With ``abort_on_error`` (and more than one rank), an exception that no one catches prints
    its traceback (prefixed by the rank) and calls ``comm.Abort(1)``: every rank exits with an
    error instead of the others waiting forever in their next collective call.

    Raises
    ------
    ImportError
        mpi4py is not installed (``pip install 'rnnfast[mpi]'``).
    """
    global _COMM
    MPI = _mpi()
    if comm is None:
        comm = MPI.COMM_WORLD
    if not isinstance(comm, MPI.Comm):
        raise TypeError(f"comm: expected an mpi4py communicator, got {type(comm).__name__}")
    _COMM = comm
    if abort_on_error and comm.Get_size() > 1:
        _install_abort_hook(comm)
    return comm


def _install_abort_hook(comm):
    previous = sys.excepthook
    if getattr(previous, "_rnnfast_abort", False):
        previous = previous._previous

    def hook(kind, value, tb):
        prefix = f"[rank {comm.Get_rank()}] "
        text = "".join(traceback.format_exception(kind, value, tb))
        sys.stderr.write("".join(prefix + line + "\n" for line in text.splitlines()))
        sys.stderr.write(f"{prefix}rnnfast.distributed: aborting all {comm.Get_size()} ranks\n")
        sys.stderr.flush()
        sys.stdout.flush()
        comm.Abort(1)

    hook._rnnfast_abort = True
    hook._previous = previous
    sys.excepthook = hook


def is_initialized():
    """Whether :func:`init` has run."""
    return _COMM is not None


def get_comm():
    """The communicator of :func:`init`."""
    if _COMM is None:
        raise RuntimeError(
            "rnnfast.distributed: call rnnfast.distributed.init() first (in a script run "
            "under mpiexec)"
        )
    return _COMM


def rank():
    """This process's rank, 0 .. size() - 1."""
    return get_comm().Get_rank()


def size():
    """The number of ranks."""
    return get_comm().Get_size()


def average(value):
    """The mean over the ranks of a number or an array (a new float64 value, or array)."""
    comm = get_comm()
    arr = np.array(value, dtype=np.float64)
    out = np.empty_like(arr)
    comm.Allreduce(arr, out, op=_mpi().SUM)
    out /= comm.Get_size()
    return float(out) if out.ndim == 0 else out


# ---- dropout ----------------------------------------------------------------------------------


def _walk(obj, seen):
    if id(obj) in seen:
        return
    seen.add(id(obj))
    yield obj
    children = getattr(obj, "named_children", None)
    if callable(children):
        for _, child in children():
            yield from _walk(child, seen)


def seed_dropout(model, seed=0, rank=None):
    """Reseed every dropout generator of ``model`` for this rank: generator i (in the order of
    the model's children, depth first) becomes ``np.random.default_rng([seed, rank, i])``.

    The generators are those of the Dropout layers (their masks) and of the RNN layers (the
    masks of ``dropout`` between stacked layers, ``input_dropout`` and ``recurrent_dropout``);
    the initialisation is not touched, nor a JordanRNN's or Seq2Seq's teacher-forcing coin
    flips, which stay those of the layer's own seed (the same on every rank). Call it with the
    same ``seed`` on every rank: each rank then draws masks of its own, and a run repeats.

    ``rank``: this process's rank (by default :func:`rank`; give it to seed without MPI).
    Returns the number of generators reseeded.
    """
    check_int("seed", seed, 0)  # the same on every rank
    if rank is None:
        rank = get_comm().Get_rank()
    check_int("rank", rank, 0)
    count = 0
    for obj in _walk(model, set()):
        for attribute in ("_rng",) if isinstance(obj, Dropout) else ("_dropout_rng",):
            if isinstance(getattr(obj, attribute, None), np.random.Generator):
                setattr(obj, attribute, np.random.default_rng([int(seed), int(rank), count]))
                count += 1
    return count


# ---- broadcasts ---------------------------------------------------------------------------------


def _same_everywhere(comm, what, signature, describe):
    """Raise the same ValueError on every rank when ``signature`` differs between ranks."""
    everyone = comm.allgather(signature)
    for r, other in enumerate(everyone):
        if other != everyone[0]:
            raise ValueError(
                f"{what}: rank {r} differs from rank 0: {describe(everyone[0], other)}"
            )


def _describe_params(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"parameter {i} is {y[0]} {y[1]} {y[2]} there and {x[0]} {x[1]} {x[2]} on rank 0"
    return f"{len(b)} parameters there, {len(a)} on rank 0"


def broadcast_parameters(model, root=0):
    """Copy rank ``root``'s parameters into every rank's model, in place (the optimizers keep
    seeing the same arrays): one broadcast per dtype.

    ``model``: anything with ``named_parameters()`` (a layer, Sequential, Module), or a
    DistributedOptimizer / optimizer, whose parameters are broadcast.

    Raises
    ------
    ValueError
        On every rank, when the models differ between ranks (parameter names, shapes or
        dtypes): data-parallel training needs the same model everywhere.
    """
    comm = get_comm()
    named = _named_params(model)
    signature = [(name, tuple(p.shape), p.dtype.str) for name, p in named]
    _same_everywhere(comm, "broadcast_parameters: the models", signature, _describe_params)
    for dtype in sorted({p.dtype.str for _, p in named}):
        params = [p for _, p in named if p.dtype.str == dtype]
        flat = np.concatenate([p.reshape(-1) for p in params]) if params else None
        comm.Bcast(flat, root=root)
        offset = 0
        for p in params:
            p[...] = flat[offset : offset + p.size].reshape(p.shape)
            offset += p.size


def _named_params(obj):
    if isinstance(obj, DistributedOptimizer):
        obj = obj.optimizer
    if hasattr(obj, "_slots") and not hasattr(obj, "named_parameters"):  # an Optimizer
        return [(s.name, s.param) for s in obj._slots]
    return list(obj.named_parameters())


def broadcast_optimizer_state(optimizer, root=0):
    """Give every rank rank ``root``'s optimizer state (step count, hyper-parameters, moment
    buffers): after a restart from a checkpoint that only rank 0 read, say.

    Raises
    ------
    ValueError
        On every rank, when the optimizers differ between ranks (class or parameter shapes).
    """
    comm = get_comm()
    inner = optimizer.optimizer if isinstance(optimizer, DistributedOptimizer) else optimizer
    signature = (type(inner).__name__, [tuple(s.param.shape) for s in inner._slots])
    _same_everywhere(
        comm,
        "broadcast_optimizer_state: the optimizers",
        signature,
        lambda a, b: f"{b[0]} over shapes {b[1]} there, {a[0]} over shapes {a[1]} on rank 0",
    )
    state = comm.bcast(inner.state_dict() if comm.Get_rank() == root else None, root=root)
    if comm.Get_rank() != root:
        inner.load_state_dict(state)


# ---- the optimizer ------------------------------------------------------------------------------


def _transparent(module):
    """A container whose backward is the library's own, which calls each child's ``backward``
    once and leaves the children's gradients alone after: its children can be hooked."""
    if isinstance(module, Sequential):
        return type(module).backward is Sequential.backward
    if isinstance(module, Module):
        return type(module).backward is Module.backward
    return False


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
        if not hasattr(optimizer, "_slots") or not hasattr(optimizer, "step"):
            raise TypeError(
                f"optimizer: expected an rnnfast.optim optimizer, got {type(optimizer).__name__}"
            )
        check_positive_int("bucket_bytes", bucket_bytes)
        check_bool("overlap", overlap)
        check_bool("trace", trace)
        self._comm = get_comm()
        self._MPI = _mpi()
        self.optimizer = optimizer
        self.bucket_bytes = int(bucket_bytes)
        self.overlap = overlap
        self.events = [] if trace else None
        self.wait_seconds = 0.0
        self._hooked = []  # units whose backward we wrapped
        self._fused_below = {}  # unit index -> (Sequential, position, index of the unit below)
        self._build(optimizer._slots)
        if overlap and self._comm.Get_size() > 1:
            self._install_hooks()
        self._reset()

    # ---- layout ----------------------------------------------------------------------------

    def _build(self, slots):
        units = {}  # id(unit) -> (unit, name, [entries]) in parameter order
        loose = []
        for slot in slots:
            if slot._module is None:
                loose.append(_Entry(slot, None, None))
                continue
            unit, key, name = _leaf(slot._module, slot._key)
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
        # a Sequential runs an Embedding fused into the RNN after it inside the RNN's backward:
        # when the RNN (layer i) is done, so is the Embedding (layer i - 1) if it was fused
        positions = {id(unit): i for i, (unit, _, _) in enumerate(self._units)}
        for owner in self._containers():
            if not isinstance(owner, Sequential):
                continue
            for i in range(1, len(owner.layers)):
                above, below = owner.layers[i], owner.layers[i - 1]
                if id(above) in positions and id(below) in positions:
                    self._fused_below[positions[id(above)]] = (owner, i - 1, positions[id(below)])

    def _containers(self):
        seen, out = set(), []
        stack = [s._module for s in self.optimizer._slots if s._module is not None]
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
        fused = self._fused_below.get(index)
        if fused is not None:
            owner, position, below = fused
            if position in getattr(owner, "_fused", ()):
                self._mark(below)
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
            grads = _current_grads([e.slot for e in self._entries])
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


# ---- the sampler --------------------------------------------------------------------------------


class DistributedSampler:
    """Each rank's batches of an epoch: index arrays into a data set of ``n`` items.

    Each epoch cuts the items (shuffled with a generator seeded by ``(seed, epoch)``, the same
    on every rank, or in order) into global batches of ``size * batch_size`` and gives rank r
    the r-th of ``size`` equal consecutive parts of each: every rank has the same number of
    batches, and global batch k is what one process with ``batch_size * size`` would take.

    The last global batch may be smaller; when its length is not a multiple of ``size`` it is
    padded by repeating its first items (those then count twice in that step), so that its
    parts are equal too. ``drop_last`` leaves out the last, smaller global batch instead:
    every item then comes at most once and every batch has ``batch_size`` items.

    With ``lengths`` the global batches are ``rnnfast.data.BucketedBatches`` (similar lengths
    together; ``max_tokens`` per rank), each cut into ``size`` parts the same way.

    Parameters
    ----------
    n : int >= 1
    batch_size : int >= 1
        Items per rank and batch.
    shuffle : bool
    seed : int >= 0
        Must be the same on every rank.
    drop_last : bool
    lengths : (n,) ints, optional
    max_tokens : int, optional (with lengths)
    rank, size : int, optional
        This rank and the number of ranks; by default those of :func:`init`.
    """

    def __init__(
        self,
        n,
        batch_size,
        *,
        shuffle=True,
        seed=0,
        drop_last=False,
        lengths=None,
        max_tokens=None,
        rank=None,
        size=None,
    ):
        self.n = check_positive_int("n", n)
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.shuffle = check_bool("shuffle", shuffle)
        self.drop_last = check_bool("drop_last", drop_last)
        self.seed = check_int("seed", seed, 0)  # the same on every rank
        if size is None:
            size = get_comm().Get_size()
        if rank is None:
            rank = get_comm().Get_rank()
        self.size = check_positive_int("size", size)
        self.rank = check_int("rank", rank, 0, self.size - 1)
        if lengths is not None:
            lengths = np.asarray(lengths)
            if lengths.shape != (self.n,):
                raise ValueError(f"lengths: expected shape ({self.n},), got {lengths.shape}")
        elif max_tokens is not None:
            raise ValueError("max_tokens: batches by tokens need lengths=")
        self.lengths = lengths
        self.max_tokens = max_tokens
        if self.drop_last and self.n < self.batch_size * self.size and lengths is None:
            raise ValueError(
                f"drop_last: {self.n} items make no full global batch of "
                f"{self.size} x {self.batch_size}; an epoch would be empty"
            )
        self.epoch = 0

    def set_epoch(self, epoch):
        """The epoch of the next iteration (each iteration moves to the next one by itself)."""
        self.epoch = int(epoch)

    def global_batches(self, epoch=None):
        """The global batches of an epoch (padded as described), before they are cut."""
        epoch = self.epoch if epoch is None else epoch
        G = self.batch_size * self.size
        rng = np.random.default_rng([self.seed, epoch])
        if self.lengths is None:
            order = rng.permutation(self.n) if self.shuffle else np.arange(self.n)
            stop = self.n - (self.n % G if self.drop_last else 0)
            batches = [order[i : min(i + G, stop)] for i in range(0, stop, G)]
        else:
            batches = list(
                BucketedBatches(
                    self.lengths,
                    G,
                    max_tokens=None if self.max_tokens is None else self.max_tokens * self.size,
                    shuffle=self.shuffle,
                    seed=int(rng.integers(2**31)),
                    drop_last=self.drop_last,
                )
            )
        out = []
        for b in batches:
            short = -len(b) % self.size
            out.append(np.concatenate([b, np.resize(b, short)]).astype(np.int64) if short else b)
        return out

    def __iter__(self):
        batches = self.global_batches()
        self.epoch += 1
        return iter([np.array_split(b, self.size)[self.rank] for b in batches])

    def __len__(self):
        """Batches per rank and epoch (the same on every rank)."""
        if self.lengths is None or self.max_tokens is None:
            G = self.batch_size * self.size
            return self.n // G if self.drop_last else -(-self.n // G)
        return len(self.global_batches())

    def __repr__(self):
        return (
            f"DistributedSampler(n={self.n}, batch_size={self.batch_size}, rank={self.rank}, "
            f"size={self.size}, shuffle={self.shuffle}, seed={self.seed}, "
            f"drop_last={self.drop_last})"
        )


# ---- training loops -----------------------------------------------------------------------------


def _allreduce_sum(values):
    arr = np.asarray(values, dtype=np.float64)
    out = np.empty_like(arr)
    get_comm().Allreduce(arr, out, op=_mpi().SUM)
    return out


def _prepare(model, optimizer, broadcast, what):
    if _COMM is None:
        raise RuntimeError(
            f"rnnfast.distributed.{what}: call rnnfast.distributed.init() first (in a script run "
            "under mpiexec)"
        )
    owned = not isinstance(optimizer, DistributedOptimizer)
    dopt = DistributedOptimizer(optimizer) if owned else optimizer
    if broadcast:
        broadcast_parameters(model)
        broadcast_optimizer_state(dopt)
    return dopt, owned


def _shared_seed(seed):
    """``seed``, or (None) one drawn by rank 0 and given to all."""
    if seed is None:
        seed = int(np.random.default_rng().integers(2**31)) if rank() == 0 else None
        seed = get_comm().bcast(seed, root=0)
    return seed


def _distributed_step(model, dopt, xb, yb, loss_fn, clip_norm, lengths=None, metrics=None):
    """One step on this rank's part of a global batch: (global mean loss, global count,
    stepped). Each rank's loss gradient is weighted by its share of the counted positions, so
    the averaged gradient is that of the mean loss over the whole global batch."""
    model.zero_grad()
    out, valid = _training._forward(model, xb, lengths)
    value, d_out, counted = _training._call_loss(loss_fn, out, yb, valid)
    total, count = _allreduce_sum([float(value) * counted, counted])
    scale = size() * counted / count if count else 0.0
    if scale != 1.0:
        d_out = d_out * scale
    model.backward(d_out)
    dopt.synchronize()
    mean = total / count if count else 0.0
    if clip_norm is not None and not math.isfinite(clip_grad_norm(model, clip_norm)):
        dopt.skip_step()  # the same averaged gradients everywhere: every rank skips
        return mean, count, False
    dopt.step()
    if metrics is not None:
        metrics.add(out, yb, valid)
    return mean, count, True


def _reduce_metrics(metrics):
    names = list(metrics.sums)
    if names:
        sums = _allreduce_sum([metrics.sums[k] for k in names])
        for k, (t, c) in zip(names, sums):
            metrics.sums[k] = [float(t), float(c)]
    return metrics.results()


def _evaluate_shard(model, x, y, *, loss, metrics, batch_size, batch_axis, lengths):
    """``training.evaluate`` over the ranks: each evaluates a contiguous share of the data."""
    loss_fn = _training._resolve(loss, _training._LOSSES, "loss")
    data = _training._data(model, x, y, lengths, None, batch_axis)
    model.eval()
    for layer in _training._stateful_layers(model):
        layer.reset_state()
    mine = np.array_split(np.arange(len(data)), size())[rank()]
    if data.lengths is not None and len(mine):
        mine = mine[np.argsort(-data.lengths[mine], kind="stable")]
    totals = _training._Metrics(metrics)
    total, counted_total = 0.0, 0
    for start in range(0, len(mine), batch_size):
        index = mine[start : start + batch_size]
        xb, yb, lb = data.batch(index)
        out, valid = _training._forward(model, xb, lb)
        value, _, counted = _training._call_loss(loss_fn, out, yb, valid, "sum")
        total += float(value)
        counted_total += counted
        totals.add(out, yb, valid)
    total, counted_total = _allreduce_sum([total, counted_total])
    return {"loss": total / max(counted_total, 1), **_reduce_metrics(totals)}


def _end_epoch(callbacks, epoch, logs, model):
    """Callbacks on every rank (the logs are the same everywhere), ModelCheckpoint on rank 0
    only; True when any asks to stop (decided together)."""
    stop = False
    for cb in callbacks:
        if isinstance(cb, _training.ModelCheckpoint) and rank() != 0:
            continue
        stop = bool(cb.on_epoch_end(epoch, logs, model)) or stop
    return bool(_allreduce_sum([stop])[0])


def fit(
    model,
    x,
    y,
    *,
    loss,
    optimizer,
    epochs=1,
    batch_size=32,
    shuffle=True,
    validation_data=None,
    metrics=(),
    callbacks=(),
    clip_norm=None,
    batch_axis=None,
    seed=0,
    verbose=True,
    lengths=None,
    mask=None,
    bucket=False,
    max_tokens=None,
    drop_last=False,
    broadcast=True,
    reseed_dropout=True,
):
    """``training.fit`` on every rank of :func:`init`: each rank trains on its part of each
    global batch of ``size() * batch_size`` (:class:`DistributedSampler`), the gradients are
    averaged (:class:`DistributedOptimizer`, built here over ``optimizer`` unless it is one),
    and the loss, metrics and validation figures are those of the whole global batches and
    data sets. Every rank gets the same history.

    Call it on every rank with the whole data set (``x``, ``y``: each rank takes its items).
    Differences from ``training.fit``:

    - ``batch_size`` is per rank; ``seed`` (shuffling) must be the same on every rank (None:
      rank 0 draws one);
    - ``reseed_dropout``: the model's dropout generators are reseeded from ``(seed, rank)``
      first (:func:`seed_dropout`): different masks on every rank, the same on every run;
      False leaves them as they are (then seed them per rank yourself: with the layers' own
      seeds every rank would draw the same masks);
    - ``broadcast``: rank 0's parameters and optimizer state are given to all first;
    - a step is that of the mean loss over every counted position of the global batch (each
      rank's loss gradient weighted by its share), so N ranks match one process with
      ``batch_size * N`` to rounding; ``clip_norm`` clips the global norm of the averaged
      gradients, and a non-finite one skips the step on every rank;
    - the progress bar is printed by rank 0 only (``verbose``), ModelCheckpoint callbacks run
      on rank 0 only, other callbacks on every rank with the same logs, and a stop asked for
      on any rank stops all;
    - validation is split over the ranks and its sums reduced.

    Raises
    ------
    RuntimeError
        :func:`init` has not run.
    """
    dopt, owned = _prepare(model, optimizer, broadcast, "fit")
    try:
        loss_fn = _training._resolve(loss, _training._LOSSES, "loss")
        _training._Metrics(metrics)
        data = _training._data(model, x, y, lengths, mask, batch_axis)
        if data.y is None:
            raise ValueError("y: expected targets, got None")
        if (bucket or max_tokens is not None) and data.lengths is None:
            raise ValueError(
                "bucket: batches by length need variable-length data (ragged "
                "sequences, or lengths= / mask=)"
            )
        seed = _shared_seed(seed)
        if reseed_dropout:
            seed_dropout(model, seed)
        sampler = DistributedSampler(
            len(data),
            batch_size,
            shuffle=shuffle,
            seed=seed,
            drop_last=drop_last,
            lengths=data.lengths if (bucket or max_tokens is not None) else None,
            max_tokens=max_tokens,
        )

        def epoch_batches(epoch):
            sampler.set_epoch(epoch)
            return list(sampler)

        return _training._run_epochs(
            model,
            data,
            epochs=epochs,
            metrics=metrics,
            verbose=verbose and rank() == 0,
            epoch_batches=epoch_batches,
            step=lambda xb, yb, lb, train_metrics: _distributed_step(
                model, dopt, xb, yb, loss_fn, clip_norm, lb, train_metrics
            ),
            metric_results=_reduce_metrics,
            validation_data=validation_data,
            evaluate_fn=lambda xv, yv, lv: _evaluate_shard(
                model,
                xv,
                yv,
                loss=loss,
                metrics=metrics,
                batch_size=batch_size,
                batch_axis=batch_axis,
                lengths=lv,
            ),
            end_epoch=lambda epoch, logs: _end_epoch(callbacks, epoch, logs, model),
            samples_per_index=size(),
        )
    finally:
        if owned:
            dopt.remove_hooks()


def fit_stream(
    model,
    tokens,
    *,
    loss,
    optimizer,
    batch_size,
    bptt,
    epochs=1,
    clip_norm=None,
    validation_tokens=None,
    callbacks=(),
    verbose=True,
    broadcast=True,
    seed=0,
    reseed_dropout=True,
):
    """``training.fit_stream`` on every rank of :func:`init`: the stream is cut into
    ``size() * batch_size`` parallel streams and rank r trains on streams
    ``r * batch_size .. (r + 1) * batch_size - 1`` (its stateful layers carry their state),
    so N ranks match one process with ``batch_size * N`` streams to rounding. Losses (and the
    validation loss, split the same way) are means over all streams; printing and checkpoints
    as :func:`fit`. Call it on every rank with the whole stream.

    ``seed`` (the same on every rank; None: rank 0 draws one) and ``reseed_dropout``: the
    dropout generators are reseeded from ``(seed, rank)`` as in :func:`fit`."""
    dopt, owned = _prepare(model, optimizer, broadcast, "fit_stream")
    try:
        if reseed_dropout:
            seed_dropout(model, _shared_seed(seed))
        loss_fn = _training._resolve(loss, _training._LOSSES, "loss")
        r, n = rank(), size()
        xs, ys = _training.stream_windows(tokens, batch_size * n, bptt)
        mine = slice(r * batch_size, (r + 1) * batch_size)
        history = {}
        for epoch in range(epochs):
            for layer in _training._stateful_layers(model):
                layer.reset_state()
            model.train()
            progress = _training._Progress(
                len(xs), f"epoch {epoch + 1}/{epochs}", verbose and r == 0
            )
            total = 0.0
            for i, (xb, yb) in enumerate(zip(xs, ys)):
                value, _, _ = _distributed_step(
                    model, dopt, np.ascontiguousarray(xb[mine]), yb[mine], loss_fn, clip_norm
                )
                total += value
                progress.update(value, (i + 1) * xb.size)
            logs = {"loss": total / len(xs)}
            if validation_tokens is not None:
                logs["val_loss"] = _evaluate_stream_shard(
                    model, validation_tokens, loss_fn, batch_size, bptt
                )
            progress.close(logs)
            for key, value in logs.items():
                history.setdefault(key, []).append(value)
            if _end_epoch(callbacks, epoch, logs, model):
                break
        return history
    finally:
        if owned:
            dopt.remove_hooks()


def _evaluate_stream_shard(model, tokens, loss_fn, batch_size, bptt):
    r, n = rank(), size()
    xs, ys = _training.stream_windows(tokens, batch_size * n, bptt)
    mine = slice(r * batch_size, (r + 1) * batch_size)
    model.eval()
    for layer in _training._stateful_layers(model):
        layer.reset_state()
    total = 0.0
    for xb, yb in zip(xs, ys):
        out = model(np.ascontiguousarray(xb[mine]))
        total += float(loss_fn(out[0] if isinstance(out, tuple) else out, yb[mine])[0])
    return float(_allreduce_sum([total])[0]) / n / len(xs)
