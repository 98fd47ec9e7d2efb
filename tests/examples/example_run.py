"""Runs an example script as a user would: its own Python process in a given folder, its output
captured as text, a time limit; what every example test starts with."""

import subprocess
import sys


def run_example(example, args, cwd, timeout=300):
    """The finished process of ``python example *args`` run in ``cwd`` (not checked: the tests
    read its status and output)."""
    return subprocess.run(
        [sys.executable, str(example), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )
