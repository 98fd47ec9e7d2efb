"""The documentation site (docs/, Sphinx with autodoc and numpydoc) builds with warnings as
errors, documents every public name through its public path, and each of its python code blocks
runs as written, on its own, in a fresh interpreter, with what ``CHECKS`` adds for it.

The build needs the ``docs`` extra (``pip install ".[docs]"``: sphinx, numpydoc); without it
those tests skip, unless RNNFAST_REQUIRE_DOCS=1 (as in CI), which makes them fail instead. What a
code block needs beyond rnnfast (optional packages, MPI, a data set) is in tests/code_blocks.py.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import textwrap
import time
import types
import zlib
from pathlib import Path

import pytest
from code_blocks import run_block

import rnnfast

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = (
    "index",
    "quickstart",
    "install",
    "pytorch",
    "keras",
    "keras_code",
    "variable_length",
    "deploying",
    "performance",
    "mixed_precision",
    "quantization",
    "distributed",
    "threads",
    "examples",
    "reliability",
    "custom_layers",
    "api/index",
)
CODE_BLOCK = re.compile(r"^([ \t]*)\.\. code-block::[ \t]+(\w+)[ \t]*$")


# ---- the build --------------------------------------------------------------------------------


def _require_sphinx():
    needed = ("sphinx", "numpydoc", "furo", "sphinx-mathjax-offline")
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if not missing:
        return
    why = f"{' and '.join(missing)} not installed (pip install '.[docs]')"
    if os.environ.get("RNNFAST_REQUIRE_DOCS") == "1":
        pytest.fail(f"{why}; RNNFAST_REQUIRE_DOCS=1 requires the docs build")
    pytest.skip(f"{why}; set RNNFAST_REQUIRE_DOCS=1 to fail instead")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The HTML site built from docs/ with -W into a temporary folder, and the build's log."""
    _require_sphinx()
    out = tmp_path_factory.mktemp("docs") / "html"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # nothing written into docs/_ext
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", str(DOCS), str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    seconds = time.perf_counter() - start
    return out, done, seconds


def test_the_site_builds_with_warnings_as_errors(site):
    out, done, seconds = site
    assert done.returncode == 0, f"sphinx -W failed:\n{done.stdout[-4000:]}\n{done.stderr}"
    assert "build succeeded" in done.stdout, done.stdout[-2000:]
    assert seconds < 300, f"the docs build took {seconds:.0f} s"


def test_every_page_is_built(site):
    out, done, _ = site
    assert done.returncode == 0, done.stderr
    for page in PAGES:
        assert (out / f"{page}.html").is_file(), page
    for page in ("layers", "functional", "training", "data", "io", "deploy", "config"):
        assert (out / "api" / f"{page}.html").is_file(), page


def _inventory(path):
    """{name: role} of the Python objects in a Sphinx objects.inv (format version 2)."""
    with open(path, "rb") as f:
        header = [f.readline() for _ in range(4)]
        body = zlib.decompress(f.read()).decode("utf-8")
    assert header[0].startswith(b"# Sphinx inventory version 2"), header[0]
    found = {}
    for line in body.splitlines():
        match = re.match(r"(.+?)\s+py:(\w+)\s+-?\d+\s", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def _resolve(path):
    """The object a dotted path below rnnfast names, or None."""
    parts = path.split(".")
    if parts[0] != "rnnfast":
        return None
    obj = rnnfast
    for part in parts[1:]:
        try:
            obj = getattr(obj, part)
        except AttributeError:
            try:
                obj = importlib.import_module(f"{obj.__name__}.{part}")
            except (AttributeError, ImportError):
                return None
    return obj


def _public_modules():
    """rnnfast and every module its __all__ names, with the names each exports."""
    modules = {"rnnfast": rnnfast}
    for name in rnnfast.__all__:
        value = getattr(rnnfast, name)
        if isinstance(value, types.ModuleType):
            modules[f"rnnfast.{name}"] = value
    return modules


def test_every_public_name_is_documented_through_a_public_path(site):
    """Each name of rnnfast.__all__ and of each public module's __all__ has an entry: under its
    own path, or (a class, function or module) under another public path for the same object,
    as ``rnnfast.pad_sequences`` is documented as ``rnnfast.data.pad_sequences``."""
    out, done, _ = site
    assert done.returncode == 0, done.stderr
    documented = _inventory(out / "objects.inv")
    objects = {}
    for path, role in documented.items():
        if role in ("class", "exception", "function", "module"):
            obj = _resolve(path)
            if obj is not None:
                objects.setdefault(id(obj), path)
    missing = []
    for modname, module in _public_modules().items():
        assert f"{modname}" in documented, f"{modname}: no module entry"
        for name in getattr(module, "__all__", ()):
            path = f"{modname}.{name}"
            obj = getattr(module, name)
            routine = inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)
            if path in documented or (routine and id(obj) in objects):
                continue
            missing.append(path)
    assert not missing, (
        f"public names without an entry in the docs: {missing}; add them to docs/api/ "
        "(a module's automodule lists its __all__ itself; top-level names and data are listed "
        "by hand)"
    )


def test_the_distributed_api_is_documented(site):
    """docs/distributed.rst lists rnnfast.distributed's names one by one (an automodule would
    repeat the module's docstring, which the page's prose covers): each name of its __all__ has
    an entry there."""
    import rnnfast.distributed

    out, done, _ = site
    assert done.returncode == 0, done.stderr
    documented = _inventory(out / "objects.inv")
    assert documented.get("rnnfast.distributed") == "module"
    names = rnnfast.distributed.__all__
    missing = [n for n in names if f"rnnfast.distributed.{n}" not in documented]
    assert not missing, f"add them to docs/distributed.rst's API section: {missing}"


def test_documented_paths_are_public(site):
    """No page documents a name under a private module path (one with a part starting with an
    underscore): a module move inside the package must not change what the docs say. (autodoc's
    canonical entries, the real locations it adds for cross-references, are not pages' names.)"""
    out, done, _ = site
    assert done.returncode == 0, done.stderr
    html = "\n".join(p.read_text(encoding="utf-8") for p in out.rglob("*.html"))
    ids = set(re.findall(r'<dt class="sig sig-object py" id="([^"]+)"', html))
    assert ids, "no documented objects found in the HTML"
    private = sorted(
        i for i in ids if any(p.startswith("_") and not p.startswith("__") for p in i.split("."))
    )
    assert not private, private
    top = {i for i in ids if i.count(".") == 1}
    assert {
        "rnnfast.RNN",
        "rnnfast.Sequential",
        "rnnfast.Module",
        "rnnfast.Linear",
        "rnnfast.Dense",
        "rnnfast.Embedding",
        "rnnfast.Dropout",
        "rnnfast.Seq2Seq",
        "rnnfast.load",
        "rnnfast.save",
    } <= top, sorted(top)


# ---- math, charts and the browser (issue 44) --------------------------------------------------

MATH_ELEMENT = re.compile(
    r'<(span|div) class="math notranslate nohighlight"[^>]*>.*?</\1>', re.DOTALL
)
CHART_PAGES = ("performance", "choosing_a_cell", "quantization", "threads")


def test_math_is_served_by_the_site(site):
    """The math renders with no network: every page with math loads MathJax from the site's own
    _static/mathjax/ (the sphinx-mathjax-offline package), never from a CDN, and no ``\\(`` or
    ``\\[`` delimiter stands outside an element MathJax typesets (or a code block). That it does
    typeset is checked in a browser (test_the_site_in_a_browser)."""
    out, done, _ = site
    assert done.returncode == 0, done.stderr
    assert (out / "_static" / "mathjax" / "tex-chtml.js").is_file()
    with_math = 0
    for path in out.rglob("*.html"):
        if "_static" in path.parts:
            continue
        html = path.read_text(encoding="utf-8")
        assert "cdn.jsdelivr" not in html and "mathjax@" not in html, path
        if MATH_ELEMENT.search(html):
            with_math += 1
            srcs = re.findall(r'<script[^>]*src="([^"]*mathjax[^"]*)"', html)
            assert srcs and all(s.endswith("_static/mathjax/tex-chtml.js") for s in srcs), (
                path,
                srcs,
            )
            assert not any("://" in s or s.startswith("//") for s in srcs), (path, srcs)
        rest = MATH_ELEMENT.sub("", html)
        rest = re.sub(r"<pre.*?</pre>", "", rest, flags=re.DOTALL)
        rest = re.sub(r"<script.*?</script>", "", rest, flags=re.DOTALL)
        raw = re.findall(r".{0,40}\\[(\[].{0,40}", rest)
        assert not raw, (path, raw[:3])
    assert with_math >= 2, "the index and choosing_a_cell pages have math"


def test_the_charts_are_on_their_pages(site):
    """The performance, choosing-a-cell, quantization and threads pages each show their chart
    (docs/charts/<page>.png, made by bench/docs_charts.py from a committed JSON)."""
    out, done, _ = site
    assert done.returncode == 0, done.stderr
    for page in CHART_PAGES:
        html = (out / f"{page}.html").read_text(encoding="utf-8")
        assert re.search(rf'<img[^>]+src="_images/{page}\.png"', html), page
        assert (out / "_images" / f"{page}.png").is_file(), page


def test_the_site_in_a_browser(site, tmp_path):
    """tools/check_docs_browser.py opens every page in headless Chromium at 1280 px: no raw math,
    no missing image, no console error, no code block wider than the column. Skipped where
    chromium (Debian's package) or websocket-client is missing, unless RNNFAST_REQUIRE_BROWSER=1
    (as in CI). The index, quickstart and performance screenshots go to $RNNFAST_DOCS_SHOTS (else
    the test's temporary folder)."""
    import shutil

    out, done, _ = site
    assert done.returncode == 0, done.stderr
    missing = []
    if not any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")):
        missing.append("chromium (apt-get install chromium)")
    if importlib.util.find_spec("websocket") is None:
        missing.append("websocket-client (pip install websocket-client)")
    if missing:
        why = f"{' and '.join(missing)} not installed"
        if os.environ.get("RNNFAST_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{why}; RNNFAST_REQUIRE_BROWSER=1 requires the browser check")
        pytest.skip(f"{why}; set RNNFAST_REQUIRE_BROWSER=1 to fail instead")
    shots = Path(os.environ.get("RNNFAST_DOCS_SHOTS") or tmp_path / "shots")
    tool = DOCS.parent / "tools" / "check_docs_browser.py"
    done = subprocess.run(
        [sys.executable, str(tool), "--site", str(out), "--shots", str(shots)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    for name in ("index", "quickstart", "performance"):
        assert (shots / f"{name}.png").stat().st_size > 1000, name


def test_the_files_the_pages_name_exist():
    """The tests, scripts and examples the pages point to (``tests/nn/test_rnn_masks.py``,
    ``python -m bench.peers.compare``) are where they say: a file moved or renamed fails here, so
    the pages follow it. (Outputs such as bench/results/ are made by the scripts, not looked
    for.)"""
    root = DOCS.parent
    named, modules = set(), set()
    for path in DOCS.rglob("*.rst"):
        if "_build" not in path.parts:
            text = path.read_text(encoding="utf-8")
            named |= set(re.findall(r"(?<![\w/-])((?:tests|bench|examples|tools)/[\w*./-]*)", text))
            modules |= set(re.findall(r"python -m (bench(?:\.\w+)+)", text))
    named = {n.rstrip(".") for n in named if not n.startswith("bench/results")}
    assert len(named) > 10, sorted(named)
    missing = sorted(n for n in named if not list(root.glob(n)))
    assert not missing, f"the pages name files that are not in the repository: {missing}"
    assert len(modules) > 5, sorted(modules)
    # a script is a module (bench/x/y.py) or a package run by its __main__ (bench/x/y/)
    scripts = {m: Path(root, *m.split(".")) for m in modules}
    missing = sorted(
        m
        for m, p in scripts.items()
        if not (p.with_suffix(".py").is_file() or (p / "__main__.py").is_file())
    )
    assert not missing, f"the pages run bench scripts that are not in the repository: {missing}"


# ---- the code blocks --------------------------------------------------------------------------


def python_blocks():
    """(id, code) of every ``.. code-block:: python`` of the pages: its id the page and the
    block's number there; the code dedented (a block may sit in a list item)."""
    blocks = []
    for path in sorted(DOCS.rglob("*.rst")):
        if "_build" in path.parts:
            continue
        page = path.relative_to(DOCS).with_suffix("").as_posix().replace("/", "-")
        lines = path.read_text(encoding="utf-8").splitlines()
        count, i = 0, 0
        while i < len(lines):
            match = CODE_BLOCK.match(lines[i])
            i += 1
            if not match:
                continue
            indent = len(match.group(1).expandtabs())
            body = []
            while i < len(lines) and (
                not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent
            ):
                body.append(lines[i])
                i += 1
            code = [line for line in body if not re.match(r"^\s+:\w[\w-]*:", line)]
            if match.group(2) == "python":
                count += 1
                blocks.append((f"{page}-{count}", textwrap.dedent("\n".join(code)).strip()))
    return blocks


BLOCKS = python_blocks()

# What some blocks must also have computed: run after the block, in its interpreter. (Most of
# these came with their sections from README.md; a page's own checks are asserts in its blocks.)
CHECKS = {
    "quickstart-4": """
assert len(history["val_loss"]) == 3 and np.isfinite(history["val_loss"]).all()
""",
    "variable_length-1": """
assert len(predicted) == len(ids)
assert logits.shape == (len(ids), 2)
""",
    "pytorch-1": """
assert isinstance(back, torch.nn.RNN) and back.bidirectional and back.num_layers == 2
""",
    "deploying-1": "assert y_ort.shape == expected.shape == (12, 3, 5)",
    "deploying-2": "assert isinstance(model, rnnfast.Sequential) and y.shape == (3, 50, 1)",
    "deploying-3": "assert y.shape == (T, 2, B, H) and h.shape == c.shape == (2, B, H)",
    "deploying-4": """
assert type(plain) is torch.nn.RNN
assert torch.equal(plain.weight_hh_l0, net.rnn.weight_hh_l0)
assert all(p.grad is not None for p in net.rnn.parameters())
""",
    "quantization-1": """
assert q.quantized == "int8" and np.abs(q(ids) - model(ids)).max() < 0.05
""",
    "distributed-1": """
assert distributed.size() == 1 and len(history["loss"]) == 2
assert np.isfinite(history["loss"]).all() and history["loss"][-1] < history["loss"][0]
assert rnnfast.load("model.npz").state_dict().keys() == model.state_dict().keys()
""",
    "distributed-2": "assert sampler.epoch == 2 and np.isfinite(distributed.average(value))",
    "examples-1": """
assert len(names) == 18 and sum(map(len, names.values())) == 20050
assert spots.values.shape == (3126,)
""",
}


def test_the_guides_have_their_python_blocks():
    ids = [i for i, _ in BLOCKS]
    for page in (
        "quickstart",
        "pytorch",
        "keras",
        "variable_length",
        "deploying",
        "quantization",
        "distributed",
        "threads",
        "examples",
    ):
        assert any(i.startswith(page + "-") for i in ids), (page, ids)


def test_every_check_has_its_block():
    assert set(CHECKS) <= {i for i, _ in BLOCKS}


@pytest.mark.parametrize("block, code", BLOCKS, ids=[i for i, _ in BLOCKS])
def test_block_runs_on_its_own(block, code, tmp_path):
    run_block(code, tmp_path, CHECKS.get(block, ""))
