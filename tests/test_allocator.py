"""rnnfast._allocator: glibc's trim threshold fixed at import, unless the environment says no."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")

PROBE = "import rnnfast._allocator as a; print(a.keep_freed_memory())"


def _run(env_extra):
    import os

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MALLOC_TRIM_THRESHOLD_", "RNNFAST_MALLOC_TRIM")
    }
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()


def test_the_threshold_is_set_on_glibc():
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    assert _run({}) == "True"


@pytest.mark.parametrize(
    "env", [{"RNNFAST_MALLOC_TRIM": "0"}, {"MALLOC_TRIM_THRESHOLD_": "131072"}]
)
def test_the_environment_can_leave_malloc_alone(env):
    assert _run(env) == "False"


FAULTS_PROBE = """
import resource
import numpy as np
import rnnfast

layer = rnnfast.RNN(64, 64, seed=0)
x = np.random.default_rng(0).standard_normal((100, 64, 64)).astype(np.float32)
dy = np.ones((100, 64, 64), np.float32)

def step():
    layer.zero_grad()
    layer(x)
    layer.backward(dy)

for _ in range(5):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""


def test_a_repeated_training_step_reuses_its_memory():
    """The trim threshold fixed at import also fixes glibc's mmap threshold (its dynamic one
    is turned off by the first): were it left at 128 KiB, each of the step's arrays of 1.6 MB
    (x, y, dy, dx: (100, 64, 64) float32) would be a fresh mmap faulted in page by page, about
    2,000 page faults a step; reused heap memory faults none."""
    import os
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MALLOC_") and k != "RNNFAST_MALLOC_TRIM"
    }
    done = subprocess.run(
        [sys.executable, "-c", FAULTS_PROBE], capture_output=True, text=True, env=env, check=True
    )
    pages_of_one_array = 100 * 64 * 64 * 4 // os.sysconf("SC_PAGE_SIZE")
    assert float(done.stdout) < pages_of_one_array / 10, done.stdout
