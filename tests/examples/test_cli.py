"""The command line every example and the demo share (issue 14): --data ROOT is the datasets
root, --out DIR holds plots and saved models, every option's help shows its default, a bad path
is one line on stderr and exit status 2 (no traceback), and without matplotlib the plot is
skipped with a message while the RESULT line still prints."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from small_data import write_monthly, write_names, write_text

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DEMO = [sys.executable, "-m", "rnnfast", "demo"]
SCRIPTS = {
    name: [sys.executable, str(EXAMPLES / f"{name}.py")]
    for name in ("names", "charlm", "sunspots", "seq2seq", "tagging")
}
SCRIPTS["demo"] = DEMO
PROG = {"demo": "python -m rnnfast demo"}
WITH_DATA_SETS = {
    "names": "names",
    "charlm": "tinyshakespeare",
    "sunspots": "sunspots",
    "demo": "sunspots",
}
# small runs of the examples that draw a plot (on data the tests write, into ROOT)
SMALL = {
    "names": ["--epochs", "1", "--hidden", "8"],
    "charlm": [
        "--epochs",
        "1",
        "--embed",
        "4",
        "--hidden",
        "8",
        "--bptt",
        "10",
        "--length",
        "5",
        "--batch-size",
        "4",
    ],
    "sunspots": ["--epochs", "1", "--window", "6"],
    "seq2seq": [
        "--steps",
        "5",
        "--train-size",
        "50",
        "--test-size",
        "10",
        "--max-len",
        "4",
        "--hidden",
        "8",
        "--embed",
        "4",
    ],
    "demo": [
        "--epochs",
        "1",
        "--steps",
        "3",
        "--batch",
        "2",
        "--input-size",
        "3",
        "--hidden-size",
        "4",
        "--repeats",
        "1",
    ],
}


def closed_port_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def offline(tmp_path):
    """An environment with no data anywhere: RNNFAST_DATA unset, a private empty cache, and
    downloads pointed at a closed port on 127.0.0.1."""
    env = {k: v for k, v in os.environ.items() if k != "RNNFAST_DATA"}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), RNNFAST_DATA_URL=closed_port_url())
    return env


def run(name, *args, env=None, cwd=None, timeout=180):
    return subprocess.run(
        [*SCRIPTS[name], *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def one_line_error(done, name):
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.endswith("\n"), done.stderr
    prog = PROG.get(name, f"{name}.py")
    assert done.stderr.startswith(f"{prog}: error: "), done.stderr
    return done.stderr


def write_data(root):
    rng = np.random.default_rng(0)
    write_names(root, rng, per_language=40)
    write_text(root, rng, lines=60)
    write_monthly(root, years=12)
    return root


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_gives_every_option_a_text_and_its_default(name):
    done = run(name, "--help", timeout=60)
    assert done.returncode == 0, done.stderr
    options = re.split(r"\n  (?=-)", done.stdout.split("options:\n", 1)[1])
    assert len(options) > 4
    for entry in options:
        flag = entry.split()[0].rstrip(",")
        text = " ".join(entry.split())
        if flag in ("-h", "--data"):
            continue
        assert "(default: " in text or "by default" in text, text  # the latter: None explained
    opts = {entry.split()[0].rstrip(",") for entry in options}
    assert "--out" in opts and ("--data" in opts) == (name != "seq2seq")
    assert "(default: rnnfast-out)" in " ".join(done.stdout.split())
    if name in WITH_DATA_SETS:
        assert "--data ROOT" in done.stdout and "RNNFAST_DATA" in done.stdout


@pytest.mark.parametrize("name", ["names", "charlm", "sunspots", "demo", "tagging"])
def test_a_data_path_that_does_not_exist_is_one_line(name, tmp_path):
    message = one_line_error(
        run(name, "--data", tmp_path / "nowhere", "--out", tmp_path / "o"), name
    )
    assert f"--data: {'root ' if name != 'tagging' else ''}{tmp_path / 'nowhere'}" in message
    assert "does not exist" in message


@pytest.mark.parametrize("name", WITH_DATA_SETS)
def test_data_nowhere_offline_is_one_line_naming_the_address_and_rnnfast_data(
    name, tmp_path, offline
):
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in (["--data", empty], [] if name != "demo" else ["--series", "sunspots"]):
        done = run(name, *args, "--out", tmp_path / "o", env=offline)
        message = one_line_error(done, name)
        data_set = WITH_DATA_SETS[name]
        assert f"data set {data_set!r} not found" in message
        assert offline["RNNFAST_DATA_URL"] in message and "RNNFAST_DATA=ROOT" in message
        assert ("--data: " in message) == bool(args and args[0] == "--data")
    assert not (tmp_path / "cache" / "rnnfast" / WITH_DATA_SETS[name]).exists()


@pytest.mark.parametrize("name", SCRIPTS)
def test_an_out_path_that_is_a_file_is_one_line(name, tmp_path):
    (tmp_path / "file").write_text("x")
    data = ["--data", write_data(tmp_path / "data")] if name in WITH_DATA_SETS else []
    if name == "tagging":
        data = ["--data", tmp_path / "nowhere.conllu"]  # --out is checked first
    message = one_line_error(run(name, *data, "--out", tmp_path / "file"), name)
    assert f"--out {tmp_path / 'file'}: " in message


@pytest.mark.parametrize("name", SMALL)
def test_without_matplotlib_the_plot_is_skipped_and_the_result_still_prints(name, tmp_path):
    blocker = tmp_path / "no-matplotlib" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('matplotlib is blocked by the test')")
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [str(blocker.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    )
    data = ["--data", write_data(tmp_path / "data")] if name in WITH_DATA_SETS else []
    out = tmp_path / "out"
    done = run(name, *data, "--out", out, *SMALL[name], env=env, cwd=tmp_path)
    assert done.returncode in ((0, 1) if name == "demo" else (0,)), done.stderr  # demo: 1 when
    assert "Traceback" not in done.stderr  # its one epoch does not beat the naive forecast
    assert 'matplotlib is not installed (pip install ".[examples]"): no ' in done.stdout
    if name != "demo":
        assert done.stdout.rstrip().splitlines()[-1].startswith("RESULT ")
    else:
        assert "check: PASSED" in done.stdout
    assert not list(out.glob("*.png"))
    saved = {"seq2seq": []}.get(name, [f"{'demo_forecaster' if name == 'demo' else name}.npz"])
    assert sorted(p.name for p in out.iterdir()) == saved
