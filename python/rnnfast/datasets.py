"""The examples' data sets: names, tinyshakespeare and sunspots, found locally or downloaded.

``load(name, root=None)`` returns a data set parsed:

``"names"``            dict language -> list of surnames (UTF-8, accents kept), languages sorted:
                       18 languages, 20,050 names (spro/practical-pytorch, MIT)
``"tinyshakespeare"``  str, the text: 1,115,394 characters (karpathy/char-rnn)
``"sunspots"``         ``MonthlySeries(values, dates)``: 3,126 monthly mean sunspot numbers,
                       1749-01 to 2009-06, float64, dates as ``datetime64[M]`` (NOAA NGDC, as
                       shipped by statsmodels; public domain)

Where it looks, in order:

1. ``root``: a folder laid out as the project's ``shared/data`` (``root/names/*.txt``,
   ``root/tinyshakespeare/input.txt``, ``root/sunspots/sunspots_monthly.dat``); the data set's
   own folder (``root`` = ``.../names``) is taken too. A ``root`` that does not exist is an error.
2. The folder named by the environment variable ``RNNFAST_DATA``, laid out the same way.
3. The per-user cache, ``$XDG_CACHE_HOME/rnnfast`` (default ``~/.cache/rnnfast``), the same way.
4. A download from the data set's canonical public address (``SOURCES``) into the cache:
   every file of the set into a staging folder, each checked against its sha256 and size,
   then renamed into place, so that a failed, corrupt or truncated download leaves nothing.

Data in ``root`` or ``RNNFAST_DATA`` is the user's and is read as it is (a smaller names folder of
one's own works); cached files are checked against their sha256 and fetched again if they
differ. ``RNNFAST_DATA_URL`` (a base address laid out as the data root, ``URL/names/Arabic.txt``
...) replaces the canonical addresses: a mirror, or a local server in the tests.

Offline with the data nowhere, ``load`` raises ``DatasetNotFoundError`` (a FileNotFoundError)
naming the address and RNNFAST_DATA; a download that does not match its sha256 (corrupt or
truncated) raises ``ChecksumError`` and caches nothing.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ._validation import check_bool

__all__ = [
    "load",
    "locate",
    "cache_dir",
    "NAMES",
    "SOURCES",
    "MonthlySeries",
    "DatasetNotFoundError",
    "ChecksumError",
    "DATA_ENV",
    "URL_ENV",
]

DATA_ENV = "RNNFAST_DATA"
URL_ENV = "RNNFAST_DATA_URL"
TIMEOUT_S = 60.0  # per network operation (connect, each read)


class DatasetNotFoundError(FileNotFoundError):
    """The data set is in none of the places looked in and could not be downloaded (or
    ``download=False``); the message says where it looked and how to provide it."""


class ChecksumError(OSError):
    """A downloaded file differs from the one expected (corrupt or truncated): nothing of it
    was cached."""


class MonthlySeries(NamedTuple):
    """A monthly series: ``values`` (N,) float64 and ``dates`` (N,) ``datetime64[M]``."""

    values: np.ndarray
    dates: np.ndarray

    @property
    def years(self):
        """The dates as fractional years at mid-month (1749.04 for January 1749): for plots
        and for arithmetic on time."""
        months = self.dates.astype("datetime64[M]").astype(np.int64)  # months since 1970-01
        return 1970 + (months + 0.5) / 12


class _File(NamedTuple):
    name: str  # the file's name in the data set's folder
    url: str  # its canonical address
    sha256: str
    size: int  # bytes


class Source(NamedTuple):
    """Where a data set comes from: ``page`` (for people), its ``files`` (each with its
    canonical address, sha256 and size) and its license."""

    page: str
    files: tuple
    license: str


_NAMES_COMMIT = "c520c52e68e945d88fff563dba1c028b6ec0197b"
_NAMES_RAW = f"https://raw.githubusercontent.com/spro/practical-pytorch/{_NAMES_COMMIT}"
_NAMES_FILES = {  # language: (sha256, bytes), of data/names/<language>.txt at the commit
    "Arabic": ("6f424a8dbe51cbbbabab7a57d38b617210125e4e3991f3c657cb79b8f104bafc", 13190),
    "Chinese": ("09ba8f1f7e38dbc99372d461b26ad4433b811fc6bfa6a3ecca6fe11a9a777465", 1246),
    "Czech": ("e17ab0ec47616a72c39cb85c783f70c3663ab64488721e5d8378f146d2226be7", 3916),
    "Dutch": ("924f32b635170eae561f84538632138fc07d4c8bbd70ba3fb980de1ecc4d2af3", 2351),
    "English": ("9cca037066d3d5989e24bc01801416162de506b5e28e15b7c092a47905d29bf2", 27125),
    "French": ("81e65b36c60ed5b89a17422f6edcadbb89546f38ad69e960e64e7ba682012a95", 2178),
    "German": ("7449cd590b97a733e18d613a4155decd77ec35dc5f8aadd7a82204dce4f051db", 5610),
    "Greek": ("3555b5186de7f401e6d991b088e9e644ca3099116477818c25ab5793801389e6", 1981),
    "Irish": ("cf8c7013256252a88d2503127b87282a11f21b2ff6db1bded68834c19a1ec058", 1858),
    "Italian": ("f88414c27d0606a11a678b4859277828c2565d6cc4d9ee932deef6e94f3b35e4", 5657),
    "Japanese": ("e0e717e114fec3e7eade4d9dabe0067c475f43147e36a22b47902ee76ad9e67f", 7622),
    "Korean": ("cd54221ccb362a6cba4c78828838cf3268a0e59744767a37cf6ec4b74036b136", 423),
    "Polish": ("45bab898af2f60ed3a728bbf6980e28821011a7caa53227553b5785903a40826", 1165),
    "Portuguese": ("50a8735f41f4f73757c8ce5b16cb0275cd86b2b214bcbc8c9805f508cb131c53", 554),
    "Russian": ("0cfe53ac18041e8f63666aa77313e0a3ff378facb132abee052d8ebdc8c3d62c", 85168),
    "Scottish": ("78d0252711d87d948ea86fe34826c51d2d794a8e52d15b5d6f7b6244d45d62dd", 752),
    "Spanish": ("1bcb462ed3316756a85781d68232bddae04498fdddd5d9219c53fd1fbdeba7a7", 2284),
    "Vietnamese": ("f3f9e4164ab47601178a6e45b216464a64122f49d05541f24bf18a757253281d", 339),
}
_CHAR_RNN_COMMIT = "6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e"
# statsmodels v0.14.6; the file is unchanged since 2011 (and byte-identical to the 0.15 wheel's)
_STATSMODELS_COMMIT = "40e6a84d26ac74623c6b94b718f0987ef0351c53"

SOURCES = {
    "names": Source(
        page=f"https://github.com/spro/practical-pytorch/tree/{_NAMES_COMMIT}/data/names",
        files=tuple(
            _File(f"{lang}.txt", f"{_NAMES_RAW}/data/names/{lang}.txt", sha, size)
            for lang, (sha, size) in _NAMES_FILES.items()
        )
        + (
            _File(
                "LICENSE",
                f"{_NAMES_RAW}/LICENSE",
                "43466675f54af3b7add4df3819d9e36a922c7e1cdf17791cb132e3f8328a0df8",
                1081,
            ),
        ),
        license="MIT, copyright (c) 2017 Sean Robertson (the LICENSE file travels with the data)",
    ),
    "tinyshakespeare": Source(
        page=f"https://github.com/karpathy/char-rnn/blob/{_CHAR_RNN_COMMIT}/data/tinyshakespeare",
        files=(
            _File(
                "input.txt",
                f"https://raw.githubusercontent.com/karpathy/char-rnn/{_CHAR_RNN_COMMIT}"
                "/data/tinyshakespeare/input.txt",
                "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
                1115394,
            ),
        ),
        license="the plays are in the public domain; the repository is MIT-licensed",
    ),
    "sunspots": Source(
        page=f"https://github.com/statsmodels/statsmodels/tree/{_STATSMODELS_COMMIT}"
        "/statsmodels/datasets/sunspots",
        files=(
            _File(
                "sunspots_monthly.dat",
                f"https://raw.githubusercontent.com/statsmodels/statsmodels/"
                f"{_STATSMODELS_COMMIT}/statsmodels/datasets/sunspots/src/"
                "sunspots_monthly.dat",
                "cc303d26340b6d599bc2878899f8c50c12323dc04b52a26ad047965ea2b9d2a3",
                21194,
            ),
        ),
        license="public domain (NOAA National Geophysical Data Center)",
    ),
}
NAMES = tuple(SOURCES)


# ---- where the data is -------------------------------------------------------------------------


def cache_dir():
    """The per-user cache folder: ``$XDG_CACHE_HOME/rnnfast``, else ``~/.cache/rnnfast``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rnnfast"


def _source(name):
    if not isinstance(name, str) or name not in SOURCES:
        raise ValueError(f"name: expected one of {', '.join(map(repr, NAMES))}, got {name!r}")
    return SOURCES[name]


def _has_local(folder, name):
    """Whether ``folder`` (a data set's own folder) holds the data set. Local data is the
    user's: a names folder needs some ``*.txt`` files (a smaller set of one's own works), the
    others their data file."""
    if not folder.is_dir():
        return False
    if name == "names":
        return any(folder.glob("*.txt"))
    return all((folder / f.name).is_file() for f in SOURCES[name].files)


def _in_root(root, name, label):
    """The data set's folder in ``root`` (``root/name``, or ``root`` itself when it is named
    after the data set and holds it), or None. A root that is not a folder is a
    DatasetNotFoundError; ``label`` says who gave it (``root /x``, ``RNNFAST_DATA=/x``)."""
    root = Path(root).expanduser()
    if not root.is_dir():
        state = "is not a folder" if root.exists() else "does not exist"
        raise DatasetNotFoundError(
            f"{label} {state}: expected a folder laid out as {_layout(name)}"
        )
    if _has_local(root / name, name):
        return root / name
    if root.name == name and _has_local(root, name):
        return root
    return None


def _layout(name):
    example = "names/*.txt" if name == "names" else f"{name}/{SOURCES[name].files[0].name}"
    return f"ROOT/{example}"


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _cached(name):
    """The cache's folder of the data set when every file is there and intact, else None."""
    folder = cache_dir() / name
    for f in SOURCES[name].files:
        path = folder / f.name
        if not path.is_file() or path.stat().st_size != f.size or _sha256(path) != f.sha256:
            return None
    return folder


def locate(name, root=None, *, download=True):
    """The folder that holds data set ``name``: in ``root``, in ``$RNNFAST_DATA``, in the
    cache, or downloaded into the cache (when ``download``), in that order.

    Raises
    ------
    ValueError
        ``name`` is not one of ``NAMES``.
    DatasetNotFoundError
        ``root`` or ``$RNNFAST_DATA`` is not a folder; or the data set is nowhere and the
        download failed (or ``download`` is False).
    ChecksumError
        A downloaded file differs from the one expected; nothing of it was cached.
    """
    _source(name)
    download = check_bool("download", download)
    if root is not None:
        found = _in_root(root, name, f"root {root}")
        if found is not None:
            return found
    env = os.environ.get(DATA_ENV)
    if env:
        found = _in_root(env, name, f"{DATA_ENV}={env}")
        if found is not None:
            return found
    found = _cached(name)
    if found is not None:
        return found
    if not download:
        raise DatasetNotFoundError(_not_found_message(name, root, None))
    return _download(name, root)


# ---- the download --------------------------------------------------------------------------------


def _url_of(name, f):
    base = os.environ.get(URL_ENV)
    return f"{base.rstrip('/')}/{name}/{f.name}" if base else f.url


def _not_found_message(name, root, failure):
    source = SOURCES[name]
    env = os.environ.get(DATA_ENV)
    looked = ([f"root {root}"] if root is not None else []) + [
        f"{DATA_ENV}={env}" if env else f"{DATA_ENV} (not set)",
        f"the cache {cache_dir()}",
    ]
    why = f"its download failed: {failure}" if failure else "downloading was not allowed"
    address = os.environ.get(URL_ENV) or source.page
    return (
        f"data set {name!r} not found (looked in {', '.join(looked)}) and {why}. Get it "
        f"from {address} into {_layout(name)} and pass ROOT as root (--data in the "
        f"examples) or set {DATA_ENV}=ROOT"
    )


def _fetch(url, path, limit):
    """Stream ``url`` into ``path``; (sha256, bytes) of what arrived, reading at most
    ``limit`` bytes (a server that sends more than the file's size is not followed: what
    arrived fails its check as corrupt). A connection that ends early (fewer bytes than its
    Content-Length) is no error here: what arrived is checked as any download is, and fails
    as truncated."""
    import http.client  # the network modules load only for a download
    import urllib.request

    digest, size = hashlib.sha256(), 0
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, open(path, "wb") as out:
        ended = False
        while not ended and size < limit:
            try:
                block = response.read(min(1 << 16, limit - size))
            except http.client.IncompleteRead as exc:
                block, ended = exc.partial, True
            ended = ended or not block
            digest.update(block)
            out.write(block)
            size += len(block)
    return digest.hexdigest(), size


def _download_file(name, root, f, staging):
    """One file into the folder ``staging``, checked against its sha256 and size."""
    import urllib.error

    url = _url_of(name, f)
    try:
        sha, size = _fetch(url, staging / f.name, f.size + 1)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DatasetNotFoundError(_not_found_message(name, root, f"{url}: {reason}")) from exc
    if sha != f.sha256 or size != f.size:
        what = "truncated" if size < f.size else "corrupt"
        got = f"more than {f.size:,}" if size > f.size else f"{size:,}"
        raise ChecksumError(
            f"the download of {url} is {what}: {got} bytes with sha256 {sha}, expected "
            f"{f.size:,} bytes with sha256 {f.sha256}; nothing was cached (try again, or "
            f"provide the data through root or {DATA_ENV})"
        )


def _download(name, root):
    """Every file of the data set into a staging folder beside the cache's, each checked;
    then moved into the cache (each move an atomic rename). Any failure leaves the cache as
    it was."""
    source = SOURCES[name]
    cache = cache_dir()
    created = not cache.exists()
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=cache, prefix=f".{name}.", suffix=".part"))
    try:
        for f in source.files:
            _download_file(name, root, f, staging)
        folder = cache / name
        folder.mkdir(exist_ok=True)
        for f in source.files:
            os.replace(staging / f.name, folder / f.name)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if created and not any(cache.iterdir()):
            cache.rmdir()  # a failed first download leaves no empty cache folder either
        raise
    shutil.rmtree(staging, ignore_errors=True)
    address = os.environ.get(URL_ENV) or source.page
    print(
        f"rnnfast.datasets: downloaded {name!r} ({len(source.files)} file(s), "
        f"{sum(f.size for f in source.files):,} bytes, sha256 checked) from {address} into "
        f"{folder}",
        file=sys.stderr,
    )
    return folder


# ---- parsing ---------------------------------------------------------------------------------


def _read_text(path):
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc})") from None


def _parse_names(folder):
    out = {}
    for path in sorted(folder.glob("*.txt")):
        out[path.stem] = [line.strip() for line in _read_text(path).splitlines() if line.strip()]
    return out


def _parse_monthly(path):
    """The rows ``Year v1 .. v12`` of the fixed-width file in order; header, rule, blank and
    note lines are skipped (a last, partial year keeps the months it has)."""
    values, dates = [], []
    for line in _read_text(path).splitlines():
        fields = line.split()
        if len(fields) < 2 or not (fields[0].isdigit() and len(fields[0]) == 4):
            continue
        try:
            row = [float(v) for v in fields[1:13]]
        except ValueError:
            continue
        if not all(math.isfinite(v) for v in row):
            raise ValueError(
                f"{path}: the row of year {fields[0]} has a value that is not a finite number "
                f"(monthly sunspot numbers are): {' '.join(fields[1:13])}"
            )
        values.extend(row)
        dates.extend(f"{fields[0]}-{m + 1:02d}" for m in range(len(row)))
    if not values:
        raise ValueError(f"{path}: no rows 'year v1 .. v12' of monthly values")
    return MonthlySeries(np.array(values, dtype=np.float64), np.array(dates, dtype="datetime64[M]"))


def load(name, root=None, *, download=True):
    """Data set ``name`` parsed: see the module's docstring for what each returns and where
    it is looked for (``root``, ``$RNNFAST_DATA``, the cache, a download when ``download``).

    Parameters
    ----------
    name : {"names", "tinyshakespeare", "sunspots"}
    root : path, optional
        A folder laid out as the project's ``shared/data`` (or the data set's own folder).
    download : bool
        Download into the cache when the data set is nowhere else.

    Returns
    -------
    dict of str to list of str (names), str (tinyshakespeare) or MonthlySeries (sunspots)

    Raises
    ------
    ValueError
        An unknown name, or a data file that cannot be parsed (the message names it): not
        UTF-8, sunspots without rows of monthly values or with a NaN or infinite value.
    DatasetNotFoundError
        ``root`` or ``$RNNFAST_DATA`` is not a folder, or the data set is nowhere and could
        not be downloaded; the message names the address and RNNFAST_DATA.
    ChecksumError
        A downloaded file is corrupt or truncated; nothing of it was cached.
    """
    folder = locate(name, root, download=download)
    if name == "names":
        return _parse_names(folder)
    if name == "tinyshakespeare":
        return _read_text(folder / "input.txt")
    return _parse_monthly(folder / "sunspots_monthly.dat")
