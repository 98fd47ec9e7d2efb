"""A tree of plain values and arrays in one .npz file, written atomically: what a training
backup is stored as.

The tree (dicts with str keys, lists, tuples, str, bool, None, ints of any size, floats, NumPy
arrays and scalars) is kept as JSON in the file's ``__tree__`` entry, each array replaced by
the name of the entry that holds it; NumPy scalars come back as the scalars they were (their
dtype kept), Python floats through their shortest repr (exact). Nothing is pickled.

:func:`write` writes to a temporary file in the destination's folder, flushes it to the disk,
and renames it over the destination (``os.replace``, atomic on POSIX and Windows): a process
killed at any point leaves either the previous file or the new one, whole.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["read", "write"]

_TREE = "__tree__"
_ARRAY, _SCALAR, _TUPLE, _DICT = "__array__", "__scalar__", "__tuple__", "__dict__"
_MARKERS = (_ARRAY, _SCALAR, _TUPLE, _DICT)
TEMPORARY = ".tmp"  # the suffix of a file being written (a killed write leaves one behind)


def _encode(value, arrays, where):
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.hasobject:
            raise TypeError(f"{where}: an object array cannot be stored without pickle")
        name = f"a{len(arrays)}"
        arrays[name] = arr
        return {(_SCALAR if isinstance(value, np.generic) else _ARRAY): name}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {_TUPLE: [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, arrays, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise TypeError(f"{where}: expected str keys, got {bad[0]!r}")
        out = {k: _encode(v, arrays, f"{where}[{k!r}]") for k, v in value.items()}
        # a dict that reads as a marker is wrapped, so it comes back as the dict it was
        return {_DICT: out} if len(out) == 1 and next(iter(out)) in _MARKERS else out
    raise TypeError(f"{where}: cannot store a {type(value).__name__} in a backup")


def _decode(value, arrays):
    if isinstance(value, list):
        return [_decode(v, arrays) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, inner),) = value.items()
        if key == _ARRAY:
            return arrays[inner]
        if key == _SCALAR:
            return arrays[inner][()]
        if key == _TUPLE:
            return tuple(_decode(v, arrays) for v in inner)
        if key == _DICT:
            return {k: _decode(v, arrays) for k, v in inner.items()}
    return {k: _decode(v, arrays) for k, v in value.items()}


def write(path, tree):
    """Store ``tree`` in ``path`` atomically (see the module's docstring)."""
    path = Path(path)
    arrays = {}
    encoded = json.dumps(_encode(tree, arrays, "backup"), allow_nan=True)
    buffer = io.BytesIO()
    np.savez(buffer, **{_TREE: np.array(encoded)}, **arrays)
    temporary = path.with_name(f"{path.name}.{os.getpid()}{TEMPORARY}")
    try:
        with open(temporary, "wb") as f:
            write_bytes(f, buffer.getbuffer())
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)


def write_bytes(f, data):
    """Write ``data`` to the open file ``f`` (one place, where the tests kill a write)."""
    f.write(data)


def _sync_folder(folder):
    """Flush the folder's entry of the renamed file to the disk, where the system allows it
    (POSIX; Windows cannot open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read(path):
    """The tree :func:`write` stored in ``path``.

    Raises
    ------
    ValueError
        Not a file :func:`write` wrote (the message names the path).
    """
    try:
        # the file opened here: np.load leaves its own open when the zip is damaged
        with open(path, "rb") as f:
            data = np.load(f, allow_pickle=False)
            if not isinstance(data, np.lib.npyio.NpzFile):
                raise ValueError("a single array, not an .npz archive")
            with data:
                arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"{path}: not a readable training backup ({error})") from None
    if _TREE not in arrays:
        raise ValueError(f"{path}: not a training backup (no {_TREE} entry)")
    return _decode(json.loads(str(arrays.pop(_TREE))), arrays)
