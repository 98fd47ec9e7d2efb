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


FAULTS = """
import resource
import numpy as np
import rnnfast

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

a = np.ones(1 << 20)  # 8 MB, written: its pages are faulted in once
del a
before = faults()
for _ in range(20):
    a = np.ones(1 << 20)
    del a
print(faults() - before)
"""


def test_large_arrays_reuse_freed_pages():
    """An 8 MB array allocated, written and freed 20 times: from the heap, whose freed pages
    are kept, it faults in (almost) no page again; mapped afresh each time (the mmap threshold
    left at 128 KiB) it would fault all of its 2048 pages every time."""
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("not glibc")
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "RNNFAST_MALLOC"))}
    out = subprocess.run(
        [sys.executable, "-c", FAULTS], capture_output=True, text=True, env=env, check=True
    )
    pages = (8 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert int(out.stdout) < pages  # less than one array's pages over all 20
