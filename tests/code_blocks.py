"""Running a code block of README.md or of docs/ as a test (tests/test_readme.py and
tests/test_docs.py): the block, then the checks it must pass, in a fresh interpreter (a
subprocess) in an empty temporary folder, with a private cache and no network.

What a block needs beyond rnnfast decides whether it runs here:

- an optional package it imports (torch, keras, threadpoolctl, onnxruntime: all in the test
  extra), or onnx for a block that uses rnnfast.onnx: a skip where it is missing, a failure
  instead when RNNFAST_REQUIRE_TORCH=1 (as in CI);
- mpi4py for a block that calls ``distributed.init(``: a skip where it is missing, a failure
  when RNNFAST_REQUIRE_MPI=1 (as in CI); the block runs as one rank (no mpiexec);
- a data set (``datasets.load(``): RNNFAST_DATA=../shared/data where that folder is beside
  the checkout, a skip otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
OPTIONAL = ("torch", "keras", "threadpoolctl", "onnx", "onnxruntime")


def _closed_port_url():
    """An address where nothing listens: a block that tries to download fails at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _require(name, variable):
    """Skip where package ``name`` is missing, or fail when ``variable`` is 1."""
    if importlib.util.find_spec(name) is not None:
        return
    if os.environ.get(variable) == "1":
        pytest.fail(f"{name} is not installed ({variable}=1)")
    pytest.skip(f"{name} is not installed")


def run_block(code, tmp_path, check=""):
    """Run ``code`` and then ``check`` (dedented) in one fresh interpreter; fail on an error."""
    imported = set(re.findall(r"^\s*(?:import|from)\s+(\w+)", code, re.M))
    if "rnnfast.onnx" in code:
        imported.add("onnx")
    for name in sorted(imported & set(OPTIONAL)):
        _require(name, "RNNFAST_REQUIRE_TORCH")
    if "distributed.init(" in code:
        _require("mpi4py", "RNNFAST_REQUIRE_MPI")
    env = {k: v for k, v in os.environ.items() if k != "RNNFAST_DATA"}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), RNNFAST_DATA_URL=_closed_port_url())
    if "datasets.load(" in code:
        if not SHARED.is_dir():
            pytest.skip("../shared/data is not beside the checkout")
        env["RNNFAST_DATA"] = str(SHARED)
    done = subprocess.run(
        [sys.executable, "-c", code + "\n" + textwrap.dedent(check)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
