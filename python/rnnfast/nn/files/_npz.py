"""Reading the arrays of an .npz file that may be hostile: every member's .npy header is read
and checked against the member's size in the archive before its data is, so that no header can
make the reader allocate more than the file holds, and only plain arrays are read (numbers or
strings; no object, structured or subarray dtypes: nothing that pickles).

``np.load`` trusts the header: a member whose header claims 2**40 elements makes it allocate
4 TiB before it finds the data missing.
"""

from __future__ import annotations

import ast
import errno
import io
import math
import os
import struct
import zipfile
import zlib

import numpy as np

__all__ = ["read_npz"]

_MAGIC = b"\x93NUMPY"
# numpy's own limit on a header it reads (np.lib.format's max_header_size)
_MAX_HEADER = 10_000
# bool, signed and unsigned ints, floats, complex, and byte or unicode strings: plain data of
# a fixed size per element (what does not belong where it is found is refused by the reader)
_KINDS = "biufcSU"
# deflate compresses at most 1032:1 (zlib's technical details): a member that claims more
# output than that from its compressed bytes is lying
_DEFLATE_RATIO = 1032
_MAX_NDIM = 32


# How zipfile and zlib report a damaged archive (a bad directory or local header, a wrong CRC,
# a deflate stream that breaks off; NotImplementedError: a zip version or header flag it does
# not read); the readers of zip formats (.npz, Keras's .keras) turn them into ValueError.
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, struct.error, NotImplementedError)


def _fail(where, why):
    return ValueError(f"{where}: not a readable rnnfast file (truncated or corrupt?): {why}")


def _size_of(source):
    """Bytes from the file's current position to its end (the position is kept)."""
    start = source.tell()
    end = source.seek(0, os.SEEK_END)
    source.seek(start)
    return end - start


def _members(archive, size, where):
    """The archive's members, each checked: a plain .npy entry whose sizes the archive can
    hold."""
    infos = archive.infolist()
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        raise _fail(where, "two members have the same name")
    if sum(i.compress_size for i in infos) > size:
        raise _fail(where, "its members claim more bytes than the file has")
    for info in infos:
        name = info.filename
        if not name.endswith(".npy") or len(name) == 4:
            raise _fail(where, f"member {name!r} is not an .npy array")
        if info.flag_bits & 0x1:
            raise _fail(where, f"member {name!r} is encrypted")
        if info.compress_type == zipfile.ZIP_STORED:
            if info.file_size != info.compress_size:
                raise _fail(where, f"member {name!r}: stored with two different sizes")
        elif info.compress_type == zipfile.ZIP_DEFLATED:
            if info.file_size > _DEFLATE_RATIO * info.compress_size + 64:
                raise _fail(
                    where,
                    f"member {name!r} claims {info.file_size:,} bytes from "
                    f"{info.compress_size:,} compressed ones, more than deflate gives",
                )
        else:
            raise _fail(
                where, f"member {name!r}: compression {info.compress_type} (stored or deflated)"
            )
    return infos


def _header(stream, info, where):
    """``(dtype, shape, fortran_order)`` of one member, its data's size checked against the
    member's."""
    name = info.filename
    preamble = stream.read(len(_MAGIC) + 2)
    if len(preamble) < len(_MAGIC) + 2 or not preamble.startswith(_MAGIC):
        raise _fail(where, f"member {name!r} is not an .npy array (no NUMPY magic)")
    version = tuple(preamble[len(_MAGIC) :])
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise _fail(where, f"member {name!r}: .npy format version {version} (1.0 to 3.0)")
    width = 2 if version == (1, 0) else 4
    raw = stream.read(width)
    if len(raw) < width:
        raise _fail(where, f"member {name!r}: its header is cut short")
    length = struct.unpack("<H" if width == 2 else "<I", raw)[0]
    start = len(preamble) + width
    if length > _MAX_HEADER or start + length > info.file_size:
        raise _fail(where, f"member {name!r}: a header of {length:,} bytes")
    text = stream.read(length)
    if len(text) < length:
        raise _fail(where, f"member {name!r}: its header is cut short")
    try:
        header = ast.literal_eval(text.decode("utf-8" if version == (3, 0) else "latin1"))
    # literal_eval's errors on a malformed literal; RecursionError and MemoryError are how the
    # parser reports nesting too deep for its stack (the text is at most _MAX_HEADER bytes)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError) as exc:
        raise _fail(where, f"member {name!r}: a malformed header ({type(exc).__name__})") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise _fail(where, f"member {name!r}: a header without descr, fortran_order and shape")
    descr, fortran, shape = header["descr"], header["fortran_order"], header["shape"]
    if not isinstance(descr, str):
        raise _fail(where, f"member {name!r}: a structured dtype {descr!r} (plain dtypes only)")
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError):
        raise _fail(where, f"member {name!r}: the dtype {descr!r}") from None
    if dtype.kind not in _KINDS or dtype.hasobject or dtype.fields or dtype.subdtype:
        raise _fail(
            where, f"member {name!r}: dtype {dtype} (plain numbers or strings only, no objects)"
        )
    if not isinstance(fortran, bool):
        raise _fail(where, f"member {name!r}: fortran_order {fortran!r} (a bool)")
    if (
        not isinstance(shape, tuple)
        or len(shape) > _MAX_NDIM
        or not all(type(n) is int and n >= 0 for n in shape)
    ):
        raise _fail(where, f"member {name!r}: the shape {shape!r}")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes != info.file_size - start - length:
        raise _fail(
            where,
            f"member {name!r}: its header claims shape {shape} of {dtype} ({nbytes:,} bytes), "
            f"the member holds {info.file_size - start - length:,}",
        )
    return dtype, shape, fortran


def _array(archive, info, where):
    with archive.open(info) as stream:
        dtype, shape, fortran = _header(stream, info, where)
        flat = np.empty(math.prod(shape), dtype=dtype)
        view = memoryview(flat).cast("B")
        filled = 0
        while filled < len(view):
            got = stream.readinto(view[filled:])
            if not got:
                raise _fail(where, f"member {info.filename!r} is cut short")
            filled += got
        if stream.read(1):  # reading to the end also checks the member's CRC
            raise _fail(where, f"member {info.filename!r} is longer than its header says")
    return flat.reshape(shape, order="F" if fortran else "C")


def read_npz(source, where):
    """Every array of the .npz in ``source`` (a binary file object, seekable), by name without
    the ``.npy``.

    Raises
    ------
    ValueError
        Not an .npz archive, truncated or corrupt, a member that is not an .npy array of
        plain numbers or strings, or a header that claims more data than its member holds.
    OSError
        Reading the file failed (not for an offset outside it: that is a ValueError).
    """
    try:
        size = _size_of(source)
        start = source.tell()
        if source.read(len(_MAGIC)) == _MAGIC:
            raise ValueError(f"{where}: a single .npy array, not an .npz archive")
        source.seek(start)
        with zipfile.ZipFile(source) as archive:
            return {
                info.filename[:-4]: _array(archive, info, where)
                for info in _members(archive, size, where)
            }
    # io.UnsupportedOperation: a file without seek
    except (*ZIP_ERRORS, io.UnsupportedOperation) as exc:
        raise _fail(where, exc) from None
    except OSError as exc:
        # EINVAL: zipfile seeking to an offset before the file's start, which a damaged
        # directory gives; other OSErrors are the file system's, and stay OSErrors
        if exc.errno != errno.EINVAL:
            raise
        raise _fail(where, f"an offset outside the file ({exc})") from None
