"""Training that survives a crash: the backup of a training loop (``backup_dir=`` of fit,
fit_stream, fit_seq2seq and rnnfast.distributed's fit) and its restore.

A backup is one file, ``backup_dir/backup.npz`` (``_archive``: no pickle, written atomically),
holding everything the rest of the run depends on:

- the model's parameters and the optimizer's state (its step count, buffers and learning rate);
- the epoch and the position in it (batches done), the history so far, the epoch's running
  sums (loss, counted positions) and the training metrics' sums;
- the random streams: the loop's own generator (shuffling, bucketing, teacher-forcing coins),
  as it was at the epoch's start (to draw the same batches again) and as it is now, and every
  ``numpy.random.Generator`` the model holds (dropout masks; a JordanRNN's or Seq2Seq's coins);
- the state stateful layers carry from one batch to the next (truncated BPTT);
- each callback's ``state_dict()``, for those that have one (EarlyStopping, ModelCheckpoint).

The per-process parts (random streams, carried states, running sums) are kept for every rank
of a data-parallel run: rank 0 gathers them and writes the one file, and at a restart reads it
and gives each rank its own part.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .._validation import check_optional_int, type_error
from . import _archive

__all__ = ["Backup", "carried_states", "model_generators"]

FORMAT = 1
FILE = "backup.npz"


def _walk(obj, path, seen):
    """``(path, obj)`` of ``obj`` and, depth first, of its children (``named_children()``)."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    yield path, obj
    children = getattr(obj, "named_children", None)
    for name, child in children() if callable(children) else ():
        yield from _walk(child, f"{path}{name}.", seen)


def model_generators(model):
    """``{"<child path>.<attribute>": Generator}``: every numpy Generator the model and its
    children hold as attributes (the dropout streams that ``random_generators()`` names, and
    others such as the teacher-forcing coins of a JordanRNN or a Seq2Seq)."""
    found = {}
    for path, obj in _walk(model, "", set()):
        for attribute, value in getattr(obj, "__dict__", {}).items():
            if isinstance(value, np.random.Generator):
                found[f"{path}{attribute}"] = value
    return found


def carried_states(model):
    """``{child path: layer}`` of the stateful layers whose state a backup keeps (``_state``,
    the state carried to the next batch: None, an array, or a list or tuple of arrays)."""
    return {
        path: obj
        for path, obj in _walk(model, "", set())
        if getattr(obj, "stateful", False) is True and "_state" in getattr(obj, "__dict__", {})
    }


def _copy_state(value):
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (list, tuple)):
        return type(value)(_copy_state(v) for v in value)
    return value


def generator_state(generator):
    """A generator's state (its bit generator's), or None for no generator."""
    return None if generator is None else generator.bit_generator.state


def set_generator_state(generator, state, where):
    if generator is None or state is None:
        if (generator is None) != (state is None):
            raise ValueError(f"backup_dir: the backup's {where} does not match this run's")
        return
    try:
        generator.bit_generator.state = state
    except (TypeError, ValueError, KeyError) as error:
        raise ValueError(f"backup_dir: cannot restore {where}: {error}") from None


class Backup:
    """Where and when a training loop backs itself up, and the file's reading and writing.

    Parameters
    ----------
    directory : str or os.PathLike
        The folder of the backup (created when missing).
    every : int >= 1, optional
        Also back up every ``every`` batches of an epoch (by default only at epoch ends).
    """

    def __init__(self, directory, every=None):
        if not isinstance(directory, (str, os.PathLike)):
            raise type_error("backup_dir", "a folder path (str or os.PathLike)", directory)
        self.directory = Path(directory)
        self.every = check_optional_int("backup_every", every, 1)
        self.path = self.directory / FILE

    @classmethod
    def of(cls, options):
        """The backup ``options`` asks for, or None (``backup_every`` alone is refused)."""
        directory, every = options.backup_dir, options.backup_every
        if directory is None:
            if every is not None:
                raise ValueError(
                    f"backup_every: needs backup_dir (where to write), got backup_every={every!r} "
                    "and backup_dir=None"
                )
            return None
        return cls(directory, every)

    def due(self, position, total):
        """Whether to back up after ``position`` batches of an epoch of ``total`` (the epoch's
        end has its own backup)."""
        return self.every is not None and position < total and position % self.every == 0

    def read(self):
        """The tree of the last backup, or None when there is none."""
        if not self.path.exists():
            return None
        tree = _archive.read(self.path)
        if not isinstance(tree, dict) or tree.get("format") != FORMAT:
            raise ValueError(
                f"{self.path}: expected a training backup of format {FORMAT}, got "
                f"{tree.get('format') if isinstance(tree, dict) else type(tree).__name__}"
            )
        return tree

    def write(self, tree):
        self.directory.mkdir(parents=True, exist_ok=True)
        _archive.write(self.path, {"format": FORMAT, **tree})

    def clear(self, finished):
        """Remove what a killed write left behind, and with ``finished`` the backup too (a
        completed run leaves nothing to resume, as Keras's BackupAndRestore)."""
        if not self.directory.is_dir():
            return
        for stray in self.directory.glob(f"{FILE}.*{_archive.TEMPORARY}"):
            stray.unlink(missing_ok=True)
        if finished:
            self.path.unlink(missing_ok=True)


# ---- a loop's backup (the hooks are the Loop's: loop_state, local_state, gather, share) -------


def local_state(loop):
    """This process's part: its random streams, carried states and the epoch's running sums."""
    return {
        "rng": generator_state(loop.rng),
        "epoch_rng": loop.epoch_rng,
        "generators": {k: generator_state(g) for k, g in model_generators(loop.model).items()},
        "carried": {
            k: _copy_state(layer._state) for k, layer in carried_states(loop.model).items()
        },
        "tally": list(loop.tally),
    }


def _checked_optimizer(loop):
    optimizer = loop.optimizer
    if not (
        callable(getattr(optimizer, "state_dict", None))
        and callable(getattr(optimizer, "load_state_dict", None))
    ):
        raise TypeError(
            "backup_dir: a backup keeps the optimizer's state, and this optimizer has no "
            f"state_dict() / load_state_dict(): got {type(optimizer).__name__}"
        )
    return optimizer


def save_backup(loop, epoch, position):
    """Back ``loop`` up at batch ``position`` of ``epoch`` (0 of the next epoch at an epoch's
    end). Every process takes part (its own state is gathered); one writes."""
    everyone = loop.gather(loop.local_state())
    if loop.rank != 0:
        return
    loop.backup.write(
        {
            "loop": type(loop).__name__,
            "processes": loop.size,
            "epoch": int(epoch),
            "position": int(position),
            "history": loop.history,
            "model": loop.model.state_dict(),
            "optimizer": _checked_optimizer(loop).state_dict(),
            "callbacks": [_callback_state(cb) for cb in loop.callbacks],
            "state": loop.loop_state(),
            "ranks": everyone,
        }
    )


def _callback_state(callback):
    state_dict = getattr(callback, "state_dict", None)
    return state_dict() if callable(state_dict) else None


def restore_backup(loop):
    """Restore the loop from its last backup and return the backup (with this process's part
    as ``"mine"``), or return None when there is none (a first run)."""
    optimizer = _checked_optimizer(loop)  # refused before any training, backup or not
    tree, error = None, None
    if loop.rank == 0:
        loop.backup.clear(False)
        try:
            tree = loop.backup.read()
        except ValueError as exc:
            error = str(exc)
    tree, error = loop.share((tree, error))
    if error is not None:
        raise ValueError(f"backup_dir: {error}")
    if tree is None:
        return None
    _check_run(loop, tree)
    model, before = loop.model, (loop.model.state_dict(), optimizer.state_dict())
    try:
        model.load_state_dict(tree["model"])
        optimizer.load_state_dict(tree["optimizer"])
    except (TypeError, ValueError) as exc:
        model.load_state_dict(before[0])
        optimizer.load_state_dict(before[1])
        raise ValueError(f"backup_dir: {loop.backup.path} does not fit this model: {exc}") from None
    for callback, state in zip(loop.callbacks, tree["callbacks"]):
        if state is not None:
            callback.load_state_dict(state)
    loop.load_loop_state(tree["state"])
    mine = tree["mine"] = tree["ranks"][loop.rank]
    _restore_streams(loop, mine)
    loop.history = {key: list(values) for key, values in tree["history"].items()}
    return tree


def _check_run(loop, tree):
    where = f"backup_dir: {loop.backup.path}"
    if tree["loop"] != type(loop).__name__ or tree["processes"] != loop.size:
        raise ValueError(
            f"{where} is the backup of a {tree['loop']} on {tree['processes']} process(es), "
            f"not of this {type(loop).__name__} on {loop.size}"
        )
    callbacks = list(loop.callbacks)
    states = tree["callbacks"]
    if len(states) != len(callbacks) or any(
        s is not None and not callable(getattr(cb, "load_state_dict", None))
        for cb, s in zip(callbacks, states)
    ):
        raise ValueError(f"{where} was written with other callbacks than this run's")


def _restore_streams(loop, mine):
    set_generator_state(loop.rng, mine["rng"], "the loop's generator")
    generators = model_generators(loop.model)
    if sorted(generators) != sorted(mine["generators"]):
        raise ValueError(
            f"backup_dir: the backup's model draws from the generators {sorted(mine['generators'])}, "
            f"this model from {sorted(generators)}"
        )
    for key, generator in generators.items():
        set_generator_state(generator, mine["generators"][key], f"generator {key}")
    carried = carried_states(loop.model)
    if sorted(carried) != sorted(mine["carried"]):
        raise ValueError(
            f"backup_dir: the backup's stateful layers are {sorted(mine['carried'])}, this "
            f"model's {sorted(carried)}"
        )
    for key, layer in carried.items():
        layer._state = _copy_state(mine["carried"][key])


def resume_epoch(loop, saved, batches):
    """The running sums of the epoch ``saved`` was taken in, restored; the batch to go on from."""
    position = saved["position"]
    if position > batches:
        raise ValueError(
            f"backup_dir: the backup was taken after batch {position} of epoch "
            f"{saved['epoch'] + 1}, which now has {batches} batches (other data?)"
        )
    loop.load_epoch_state(saved["mine"])
    return position
