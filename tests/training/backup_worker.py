"""A training run that tests/training/test_backup.py kills and runs again:
``python backup_worker.py KIND BACKUP_DIR OUT`` (under ``mpiexec -n 2`` for KIND ``mpi_fit``).

KIND is ``fit``, ``stream``, ``seq2seq`` or ``mpi_fit``: a small model with dropout trained by
training.fit, fit_stream, fit_seq2seq or rnnfast.distributed.fit with ``backup_dir`` and
``backup_every``. A run that finishes writes OUT (an .npz of the final parameters and the history,
as JSON, under ``__history__``; under MPI, rank r writes OUT.r).

The environment variable RNNFAST_TEST_KILL (read here only, never by the library) makes the
process kill itself with SIGKILL, as a crash would, at one point of this run:

- ``step:K``: before the K-th optimizer step of this process (the batch's forward and backward
  done, its step not taken);
- ``write:K``: inside the K-th backup write, half of the temporary file written;
- ``rename:K``: in the K-th backup write, the temporary file whole and on the disk, before its
  rename over the backup.

``@R`` after it (``step:3@1``) kills on MPI rank R only (by default every rank that gets there).
The functions that build and train are importable, so that the test runs the uninterrupted
reference in its own process.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import numpy as np

import rnnfast
from rnnfast import optim, training
from rnnfast.training import _archive

EPOCHS = 3


def ragged(seed, n):
    rng = np.random.default_rng(seed)
    x = [rng.integers(1, 9, size=int(rng.integers(2, 7))) for _ in range(n)]
    return x, rng.integers(0, 3, size=n)


def classifier():
    return rnnfast.Sequential(
        [
            rnnfast.Embedding(9, 4, seed=0),
            rnnfast.RNN(
                4, 6, num_layers=2, dropout=0.3, batch_first=True, return_sequences=False, seed=1
            ),
            rnnfast.Dropout(0.3, seed=2),
            rnnfast.Dense(6, 3, seed=3),
        ]
    )


def run_fit(backup_dir, fit=training.fit, batch_size=6):
    model = classifier()
    x, y = ragged(0, 36)
    history = fit(
        model,
        x,
        y,
        loss="cross_entropy",
        optimizer=optim.Adam(model, lr=0.02),
        metrics=["accuracy"],
        epochs=EPOCHS,
        batch_size=batch_size,
        bucket=True,
        seed=5,
        validation_data=ragged(1, 10),
        callbacks=[training.EarlyStopping(monitor="val_loss", patience=50)],
        verbose=0,
        backup_dir=backup_dir,
        backup_every=None if backup_dir is None else 2,
    )
    return model, history


def run_stream(backup_dir):
    model = rnnfast.Sequential(
        [
            rnnfast.Embedding(11, 5, seed=0),
            rnnfast.RNN(5, 7, batch_first=True, return_sequences=True, stateful=True, seed=1),
            rnnfast.Dropout(0.2, seed=2),
            rnnfast.Linear(7, 11, seed=3),
        ]
    )
    tokens = np.random.default_rng(2).integers(0, 11, size=240)
    history = training.fit_stream(
        model,
        tokens[:200],
        loss="cross_entropy",
        optimizer=optim.SGD(model, lr=0.1, momentum=0.9),
        batch_size=4,
        bptt=5,
        epochs=EPOCHS,
        clip_norm=1.0,
        validation_tokens=tokens[200:],
        verbose=0,
        backup_dir=backup_dir,
        backup_every=None if backup_dir is None else 3,
    )
    return model, history


def run_seq2seq(backup_dir):
    model = rnnfast.Seq2Seq(8, 8, 4, 6, seed=0)
    rng = np.random.default_rng(3)
    sources = [rng.integers(3, 8, size=int(rng.integers(1, 5))) for _ in range(20)]
    targets = [s[::-1].copy() for s in sources]
    history = training.fit_seq2seq(
        model,
        sources,
        targets,
        optimizer=optim.Adam(model, lr=0.02),
        bos=1,
        eos=2,
        epochs=EPOCHS,
        batch_size=4,
        # a schedule over the steps (the loop's clock), its coins drawn from the loop's generator
        teacher_forcing=lambda step: max(0.2, 1.0 - 0.05 * step),
        seed=4,
        verbose=0,
        backup_dir=backup_dir,
        backup_every=None if backup_dir is None else 2,
    )
    return model, history


def run_mpi_fit(backup_dir):
    from rnnfast import distributed

    return run_fit(backup_dir, fit=distributed.fit, batch_size=3)


RUNS = {"fit": run_fit, "stream": run_stream, "seq2seq": run_seq2seq, "mpi_fit": run_mpi_fit}


def _kill():
    os.kill(os.getpid(), signal.SIGKILL)


def arm(spec, rank):
    """Make this process kill itself at the point ``spec`` names (see the module's docstring)."""
    point, _, only = spec.partition("@")
    if only and int(only) != rank:
        return
    what, count = point.split(":")
    target, seen = int(count), [0]

    def reached():
        seen[0] += 1
        return seen[0] == target

    if what == "step":
        for cls in (optim.Adam, optim.SGD):
            original = cls.step

            def step(self, _original=original):
                if reached():
                    _kill()
                _original(self)

            cls.step = step
        return
    original_write = _archive.write_bytes

    def write_bytes(f, data):
        if not reached():
            return original_write(f, data)
        if what == "write":
            f.write(bytes(data[: len(data) // 2]))
        else:
            original_write(f, data)
        f.flush()
        os.fsync(f.fileno())
        _kill()

    _archive.write_bytes = write_bytes


def save(path, model, history):
    arrays = dict(model.state_dict())
    arrays["__history__"] = np.array(json.dumps(history))
    np.savez(path, **arrays)


def main(kind, backup_dir, out):
    rnnfast.set_num_threads(1)
    rank = 0
    if kind == "mpi_fit":
        from rnnfast import distributed

        distributed.init()
        rank = distributed.rank()
        out = f"{out}.{rank}"
    spec = os.environ.get("RNNFAST_TEST_KILL")
    if spec:
        arm(spec, rank)
    model, history = RUNS[kind](backup_dir)
    save(out, model, history)


if __name__ == "__main__":
    main(*sys.argv[1:4])
