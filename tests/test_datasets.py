"""rnnfast.datasets: the lookup order (root, RNNFAST_DATA, the cache, a download), downloads
from a local HTTP server on 127.0.0.1 that the tests start and stop (good, corrupt, truncated,
cut short, missing, offline), and the parsing of each data set. The hard-coded sha256 sums are
checked against the copies in ../shared/data where that folder is beside the checkout."""

from __future__ import annotations

import hashlib
import http.server
import threading
from pathlib import Path

import numpy as np
import pytest

from rnnfast import datasets
from rnnfast.datasets import ChecksumError, DatasetNotFoundError

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(), reason="../shared/data is not beside the checkout"
)

MONTHLY = """\
                          MONTHLY MEAN SUNSPOT NUMBERS
=====================================================
Year    Jan   Feb   Mar   Apr   May   Jun   Jul   Aug   Sep   Oct   Nov   Dec
-----------------------------------------------------
1749    58.0  62.6  70.0  55.7  85.0  83.5  94.8  66.3  75.9  75.5 158.6  85.2

1750    73.3  75.9  89.2  88.3  90.0 100.0  85.4 103.0  91.2  65.7  63.3  75.4
1751    70.0  43.5  45.3
-----------------------------------------------------
No observations were available during February 1824.  The value shown was

Note:  Data are preliminary after Dec 08.
"""
SMALL = {  # a small data set of each kind: file name -> bytes
    "names": {
        "Alpha.txt": b"Abel\nAda\n\n",
        "Omega.txt": "Zoë\n Zed \n".encode(),
        "LICENSE": b"MIT\n",
    },
    "tinyshakespeare": {"input.txt": b"First Citizen:\nBefore we proceed any further.\n"},
    "sunspots": {"sunspots_monthly.dat": MONTHLY.encode()},
}


def small_source(name):
    files = tuple(
        datasets._File(
            fname,
            f"https://example.invalid/{name}/{fname}",
            hashlib.sha256(data).hexdigest(),
            len(data),
        )
        for fname, data in SMALL[name].items()
    )
    return datasets.Source(f"https://example.invalid/{name}", files, "test data")


def write_root(root, name, files=None):
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    for fname, data in (files or SMALL[name]).items():
        (folder / fname).write_bytes(data)
    return root


class Server:
    """A local HTTP server of ``files`` ({"/names/Alpha.txt": bytes}) on 127.0.0.1, in a
    thread. ``mode`` spoils what it serves: "corrupt" (a byte changed), "short" (the first
    half, with its own length: a truncated file) or "cut" (the first half after announcing
    the whole length, then the connection closes). ``requests`` lists the paths asked for."""

    def __init__(self, files):
        self.files, self.mode, self.requests = files, "good", []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append(self.path)
                data = server.files.get(self.path)
                if data is None:
                    self.send_error(404)
                    return
                length = len(data)
                if server.mode == "corrupt":
                    data = bytes([data[0] ^ 1]) + data[1:]
                elif server.mode in ("short", "cut"):
                    data = data[: len(data) // 2]
                    length = len(data) if server.mode == "short" else length
                self.send_response(200)
                self.send_header("Content-Length", str(length))
                self.end_headers()
                self.wfile.write(data)
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A private cache, RNNFAST_DATA unset, downloads pointed at a closed port (offline)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(datasets.DATA_ENV, raising=False)
    monkeypatch.setenv(datasets.URL_ENV, closed_port_url())
    return tmp_path


def closed_port_url():
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def small(monkeypatch):
    """The small data sets in place of the real ones in SOURCES."""
    for name in SMALL:
        monkeypatch.setitem(datasets.SOURCES, name, small_source(name))


@pytest.fixture
def server(monkeypatch):
    files = {f"/{name}/{fname}": data for name, fs in SMALL.items() for fname, data in fs.items()}
    srv = Server(files)
    monkeypatch.setenv(datasets.URL_ENV, srv.url)
    yield srv
    srv.close()


def cache_files(env):
    cache = env / "xdg" / "rnnfast"
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) if cache.exists() else []


EXPECTED = {
    "names": {"Alpha": ["Abel", "Ada"], "Omega": ["Zoë", "Zed"]},
    "tinyshakespeare": "First Citizen:\nBefore we proceed any further.\n",
}


def check_small(name, data):
    if name == "sunspots":
        assert isinstance(data, datasets.MonthlySeries)
        assert data.values.dtype == np.float64 and data.values.shape == (27,)
        assert data.values[0] == 58.0 and data.values[12] == 73.3 and data.values[-1] == 45.3
        assert data.dates[0] == np.datetime64("1749-01") and data.dates[-1] == np.datetime64(
            "1751-03"
        )
        np.testing.assert_allclose(data.years[[0, 12]], [1749 + 0.5 / 12, 1750 + 0.5 / 12])
    else:
        assert data == EXPECTED[name]


# ---- local folders -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", datasets.NAMES)
def test_root(env, small, name):
    root = write_root(env / "root", name)
    check_small(name, datasets.load(name, root))
    check_small(name, datasets.load(name, str(root / name)))  # the data set's own folder
    assert cache_files(env) == []


def test_names_root_of_ones_own_needs_no_license(env):
    root = env / "root"
    write_root(root, "names", {"Klingon.txt": b"Worf\n"})
    assert datasets.load("names", root) == {"Klingon": ["Worf"]}


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_root_that_is_not_a_folder_is_an_error(env, small, kind):
    root = env / "root"
    if kind == "file":
        root.write_text("x")
    with pytest.raises(
        DatasetNotFoundError,
        match=rf"root .*root "
        rf"{'is not a folder' if kind == 'file' else 'does not exist'}: "
        r"expected a folder laid out as ROOT/names/\*\.txt",
    ):
        datasets.load("names", root)


def test_rnnfast_data(env, small, monkeypatch):
    data = write_root(env / "data", "tinyshakespeare")
    monkeypatch.setenv(datasets.DATA_ENV, str(data))
    check_small("tinyshakespeare", datasets.load("tinyshakespeare"))
    # a root without the data set passes on to RNNFAST_DATA; one with it comes first
    empty = env / "empty"
    empty.mkdir()
    check_small("tinyshakespeare", datasets.load("tinyshakespeare", empty))
    write_root(env / "mine", "tinyshakespeare", {"input.txt": b"mine"})
    assert datasets.load("tinyshakespeare", env / "mine") == "mine"
    monkeypatch.setenv(datasets.DATA_ENV, str(env / "nowhere"))
    with pytest.raises(DatasetNotFoundError, match=r"RNNFAST_DATA=.*nowhere does not exist"):
        datasets.load("tinyshakespeare")


def test_cache(env, small):
    cache = datasets.cache_dir()
    assert cache == env / "xdg" / "rnnfast"
    write_root(cache, "sunspots")
    check_small("sunspots", datasets.load("sunspots"))  # offline: it came from the cache
    assert datasets.locate("sunspots") == cache / "sunspots"


def test_cache_default_is_home(monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert datasets.cache_dir() == tmp_path / ".cache" / "rnnfast"


# ---- downloads ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", datasets.NAMES)
def test_good_download(env, small, server, name, capsys):
    check_small(name, datasets.load(name))
    assert f"downloaded {name!r}" in capsys.readouterr().err
    assert cache_files(env) == [name] + [f"{name}/{f}" for f in sorted(SMALL[name])]
    asked = len(server.requests)
    assert asked == len(SMALL[name])
    check_small(name, datasets.load(name))  # now from the cache
    assert len(server.requests) == asked


def test_a_damaged_cache_file_is_fetched_again(env, small, server):
    datasets.load("names")
    (datasets.cache_dir() / "names" / "Alpha.txt").write_bytes(b"Abel\n")
    check_small("names", datasets.load("names"))
    assert len(server.requests) == 2 * len(SMALL["names"])


@pytest.mark.parametrize(
    "mode, what", [("corrupt", "corrupt"), ("short", "truncated"), ("cut", "truncated")]
)
@pytest.mark.parametrize("name", ["names", "tinyshakespeare"])
def test_bad_download_is_a_checksum_error_and_caches_nothing(env, small, server, name, mode, what):
    server.mode = mode
    with pytest.raises(
        ChecksumError,
        match=rf"the download of {server.url}/{name}/\S+ is "
        rf"{what}: .* expected \d+ bytes with sha256 "
        r"[0-9a-f]{64}; nothing was cached",
    ):
        datasets.load(name)
    assert cache_files(env) == []  # no file, no staging folder
    assert not (env / "xdg" / "rnnfast").exists()  # nor the cache folder the download made
    server.mode = "good"
    check_small(name, datasets.load(name))


def test_missing_file_on_the_server(env, small, server):
    del server.files["/names/Omega.txt"]
    with pytest.raises(DatasetNotFoundError, match=r"names/Omega\.txt: Not Found"):
        datasets.load("names")
    assert cache_files(env) == []  # Alpha.txt arrived, but not the whole set: nothing cached


@pytest.mark.parametrize("name", datasets.NAMES)
def test_offline(env, small, name):
    url = datasets.os.environ[datasets.URL_ENV]
    with pytest.raises(DatasetNotFoundError) as info:
        datasets.load(name, env)
    message = str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    assert (
        f"data set {name!r} not found (looked in root {env}, RNNFAST_DATA (not set), "
        f"the cache {env / 'xdg' / 'rnnfast'}) and its download failed: {url}/{name}/" in message
    ) and "refused" in message
    assert f"Get it from {url} into ROOT/{name}" in message
    assert message.endswith("pass ROOT as root (--data in the examples) or set RNNFAST_DATA=ROOT")
    assert "\n" not in message
    assert cache_files(env) == []


def test_offline_message_names_the_canonical_address(env, monkeypatch):
    monkeypatch.delenv(datasets.URL_ENV)
    with pytest.raises(
        DatasetNotFoundError,
        match=r"and downloading was not allowed\. Get it from "
        r"https://github\.com/karpathy/char-rnn/.*tinyshakespeare into "
        r"ROOT/tinyshakespeare/input\.txt .*RNNFAST_DATA",
    ):
        datasets.load("tinyshakespeare", download=False)


def test_download_must_be_a_bool(env):
    with pytest.raises(TypeError, match=r"download: expected a bool, got 0 \(int\)"):
        datasets.load("names", download=0)


def test_unknown_name(env):
    with pytest.raises(
        ValueError,
        match=r"name: expected one of 'names', 'tinyshakespeare', "
        r"'sunspots', got 'mnist'",
    ):
        datasets.load("mnist")


def test_unparsable_local_data_names_the_file(env):
    root = write_root(env / "root", "sunspots", {"sunspots_monthly.dat": b"no rows\n"})
    with pytest.raises(ValueError, match=r"sunspots_monthly\.dat: no rows"):
        datasets.load("sunspots", root)
    write_root(root, "tinyshakespeare", {"input.txt": b"\xff\xfe"})
    with pytest.raises(ValueError, match=r"input\.txt: not UTF-8"):
        datasets.load("tinyshakespeare", root)


# ---- the real data sets --------------------------------------------------------------------------


@needs_shared
@pytest.mark.parametrize("name", datasets.NAMES)
def test_sums_match_the_shared_copies(name):
    for f in datasets.SOURCES[name].files:
        data = (SHARED / name / f.name).read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (f.sha256, f.size), f.name
        assert f.url.startswith("https://raw.githubusercontent.com/")


@needs_shared
def test_real_data_sets_parse():
    names = datasets.load("names", SHARED)
    assert len(names) == 18 and sum(map(len, names.values())) == 20050
    assert list(names) == sorted(names) and "Ślusarski" in names["Polish"]
    text = datasets.load("tinyshakespeare", SHARED)
    assert len(text) == 1115394 and len(set(text)) == 65 and text.count("\n") == 40000
    spots = datasets.load("sunspots", SHARED)
    assert spots.values.shape == spots.dates.shape == (3126,)
    assert spots.dates[0] == np.datetime64("1749-01") and spots.dates[-1] == np.datetime64(
        "2009-06"
    )
    assert np.all(spots.values >= 0) and spots.values.max() > 200


@needs_shared
def test_real_download_from_a_mirror_of_the_shared_folder(env, monkeypatch):
    files = {
        f"/{name}/{f.name}": (SHARED / name / f.name).read_bytes()
        for name in datasets.NAMES
        for f in datasets.SOURCES[name].files
    }
    srv = Server(files)
    try:
        monkeypatch.setenv(datasets.URL_ENV, srv.url)
        assert sum(map(len, datasets.load("names").values())) == 20050
        assert len(datasets.load("tinyshakespeare")) == 1115394
        assert len(datasets.load("sunspots").values) == 3126
    finally:
        srv.close()
    assert (datasets.cache_dir() / "names" / "LICENSE").is_file()  # it travels with the data
    assert len(srv.requests) == 18 + 1 + 1 + 1
