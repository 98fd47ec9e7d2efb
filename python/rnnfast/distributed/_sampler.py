"""Each rank's batches of an epoch: its part of each global batch."""

from __future__ import annotations

import numpy as np

from .._validation import check_bool, check_int, check_positive_int
from ..data.batching import BucketedBatches
from ._communication import get_comm

__all__ = ["DistributedSampler"]


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
