"""rnnfast.datasets on hostile input: a data file with values its format forbids, and a server
that sends more than the file it should (issue 27, untrusted files)."""

from __future__ import annotations

import hashlib

import pytest

from rnnfast import datasets

ROW = "1749    58.0  62.6  70.0  55.7  85.0  83.5  94.8  66.3  75.9  75.5 158.6  85.2\n"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(datasets.DATA_ENV, raising=False)
    return tmp_path


def _root(env, name, files):
    folder = env / "root" / name
    folder.mkdir(parents=True)
    for fname, data in files.items():
        (folder / fname).write_bytes(data)
    return env / "root"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999"])
def test_sunspots_value_that_is_not_finite(env, value):
    bad = ROW.replace("62.6", value.rjust(4)).replace("1749", "1750")
    root = _root(env, "sunspots", {"sunspots_monthly.dat": (ROW + bad).encode()})
    with pytest.raises(ValueError, match=r"sunspots_monthly\.dat: the row of year 1750"):
        datasets.load("sunspots", root, download=False)


def test_names_file_not_utf8(env):
    root = _root(env, "names", {"Alpha.txt": b"Abel\n\xff\xfe\n"})
    with pytest.raises(ValueError, match=r"Alpha\.txt: not UTF-8"):
        datasets.load("names", root, download=False)


def test_cache_file_of_another_size_is_not_read(env):
    folder = env / "xdg" / "rnnfast" / "sunspots"
    folder.mkdir(parents=True)
    (folder / "sunspots_monthly.dat").write_bytes(b"x" * 10)
    with pytest.raises(datasets.DatasetNotFoundError):
        datasets.load("sunspots", download=False)


def test_fetch_reads_no_more_than_its_limit(tmp_path):
    source = tmp_path / "endless.bin"
    source.write_bytes(b"a" * (1 << 20))
    target = tmp_path / "got.bin"
    sha, size = datasets._fetch(source.as_uri(), target, 100)
    assert size == 100 and target.stat().st_size == 100
    assert sha == hashlib.sha256(b"a" * 100).hexdigest()


def test_download_longer_than_the_file_is_a_checksum_error(env, monkeypatch):
    data = b"First Citizen:\n"
    source = datasets.Source(
        "https://example.invalid/tinyshakespeare",
        (
            datasets._File(
                "input.txt", "https://example.invalid/x", hashlib.sha256(data).hexdigest(), 15
            ),
        ),
        "test data",
    )
    monkeypatch.setitem(datasets.SOURCES, "tinyshakespeare", source)
    served = env / "served" / "tinyshakespeare"
    served.mkdir(parents=True)
    (served / "input.txt").write_bytes(data + b"x" * (1 << 20))
    monkeypatch.setenv(datasets.URL_ENV, (env / "served").as_uri())
    with pytest.raises(datasets.ChecksumError, match="corrupt: more than 15 bytes"):
        datasets.load("tinyshakespeare")
    assert not (env / "xdg" / "rnnfast").exists()
