"""A seeded subset of tools/fuzz_loaders.py: each loader of untrusted files on a few hundred
mutated inputs, none of which may raise anything but ValueError or OSError (the full run is
100,000 executions per loader; see the tool's docstring)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("onnx")

_TOOL = Path(__file__).resolve().parents[1] / "tools" / "fuzz_loaders.py"
_spec = importlib.util.spec_from_file_location("fuzz_loaders", _TOOL)
fuzz_loaders = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz_loaders)

RUNS = {"npz": 400, "onnx": 400, "vocab": 200, "conllu": 400, "datasets": 300}


@pytest.mark.parametrize("loader", fuzz_loaders.LOADERS)
def test_seeded_mutations_raise_only_documented_errors(loader, tmp_path):
    runs, crashes, kinds = fuzz_loaders.fuzz(loader, RUNS[loader], seed=27, crashes=tmp_path)
    loaded = kinds.pop("(loaded)")
    assert runs == RUNS[loader]
    assert crashes == 0, f"{loader}: {kinds}; inputs in {tmp_path}"
    assert 0 < loaded < runs  # the mutations reach both outcomes


def test_a_crash_is_recorded_with_its_input(tmp_path):
    class Crashing(fuzz_loaders.Runner):
        def __call__(self, data):
            raise MemoryError("a header asked for 4 TiB")

    outcome = fuzz_loaders.run_one(Crashing("npz", tmp_path), b"x")
    assert "MemoryError: a header asked for 4 TiB" in outcome
