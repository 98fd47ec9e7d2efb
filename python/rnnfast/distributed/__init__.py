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

The package: ``_communication`` (the communicator; mpi4py is imported there only),
``_broadcast`` (rank 0's model and optimizer to all), ``_optimizer`` (DistributedOptimizer),
``_sampler`` (DistributedSampler), ``_seeding`` (the ranks' random streams) and ``_fit`` (fit and
fit_stream: training's loops, ``rnnfast.training._loop``, with the ranks' step).
"""

from __future__ import annotations

from ._broadcast import broadcast_optimizer_state, broadcast_parameters
from ._communication import average, get_comm, init, is_initialized, rank, size
from ._fit import fit, fit_stream
from ._optimizer import DistributedOptimizer
from ._sampler import DistributedSampler
from ._seeding import seed_dropout

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
