"""Runs an example with --quantize on the small data its test wrote and reads the RESULT line:
the part of the examples' --quantize tests that does not depend on the example."""

import re

from example_run import run_example


def run_quantized(example, args, mode, cwd, names):
    """``example`` run with ``args`` and ``--quantize mode`` in ``cwd``; checks that it succeeds,
    prints the quantized model's summary and a RESULT line of exactly ``names`` (in that order),
    and returns that line's figures by name."""
    done = run_example(example, [*args, "--quantize", mode], cwd)
    assert done.returncode == 0, done.stderr
    pattern = "RESULT " + " ".join(f"{name}=([0-9.]+)" for name in names) + "$"
    match = re.search(pattern, done.stdout)
    assert match, done.stdout
    assert "Total weight bytes:" in done.stdout  # the quantized model's summary
    return dict(zip(names, map(float, match.groups()), strict=True))
