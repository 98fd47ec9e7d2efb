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
