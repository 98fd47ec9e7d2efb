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

RUNS = {"npz": 400, "onnx": 400, "keras": 400, "vocab": 200, "conllu": 400, "datasets": 300}


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


def _mapped_bytes():
    """The process's address space in use (Linux's VmSize), 0 where unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@pytest.mark.parametrize("seed", range(len(fuzz_loaders._npz_seeds())))
def test_every_config_field_of_every_saved_class_is_bounded(seed, tmp_path):
    """Field by field (issue 43): every field of a saved class's config, nested layers'
    included, set to hostile sizes and types, is refused with ValueError or loads (and a loaded
    recurrent layer is called and stepped) within a 4 GiB address space: no size in a file
    makes a load or a call allocate by it."""
    import resource

    seed_file = fuzz_loaders._npz_seeds()[seed]
    values = [-1, 0, 2**31, 2**31 + 1, 2**40, 10**30, 0.5, "x", [2**40]]
    runner = fuzz_loaders.Runner("npz", tmp_path)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    # 4 GiB beyond what this process maps already (the test session's own libraries)
    cap = _mapped_bytes() + (4 << 30)
    resource.setrlimit(
        resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard)
    )
    try:
        for field, value, data in fuzz_loaders.config_field_cases(seed_file, values):
            outcome = fuzz_loaders.run_one(runner, data, timeout=20)
            assert outcome in ("loaded", "refused"), f"{field} = {value!r}:\n{outcome}"
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.parametrize("seed", range(len(fuzz_loaders._keras_models())))
def test_every_config_field_of_every_keras_front_file_is_bounded(seed, tmp_path):
    """Field by field (issue 43 item 4): every field of a .keras file's config.json (each
    layer's, the input's shape, the compile config) set to hostile sizes and types is refused
    with ValueError or loads (and the model predicts) within a 4 GiB address space."""
    import resource

    seed_file = fuzz_loaders._keras_seeds(tmp_path)[seed]
    values = [-1, 0, 2**31, 2**40, 10**30, 0.5, "x", None, [2**40], {"a": 1}]
    runner = fuzz_loaders.Runner("keras", tmp_path)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _mapped_bytes() + (4 << 30)
    resource.setrlimit(
        resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard)
    )
    outcomes = {"loaded": 0, "refused": 0}
    try:
        for field, value, data in fuzz_loaders.keras_config_cases(seed_file, values):
            outcome = fuzz_loaders.run_one(runner, data, timeout=20)
            assert outcome in outcomes, f"{field} = {value!r}:\n{outcome}"
            outcomes[outcome] += 1
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert outcomes["loaded"] and outcomes["refused"]
