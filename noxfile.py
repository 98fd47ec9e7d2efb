"""One command for the checks that are not tests: ``nox -s lint`` (CI runs it).

- ruff check and ruff format --check over the Python (settings in pyproject.toml);
- clang-format --dry-run --Werror over the C++ (style in .clang-format).

The tools are pinned, so every machine formats the same way."""

import subprocess

import nox

nox.options.sessions = ["lint"]

RUFF = "ruff==0.17.6"
CLANG_FORMAT = "clang-format==18.1.8"
PYTHON_PATHS = ["python", "tests", "examples", "bench", "tools", "docs", "noxfile.py"]


def _cpp_files():
    listed = subprocess.run(
        # .inl: the kernels' shared source, included once per ISA
        ["git", "ls-files", "cpp/*.cpp", "cpp/*.hpp", "cpp/*.inl", "bench/cpp/*.cpp"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return listed


@nox.session(reuse_venv=True)
def lint(session):
    session.install(RUFF, CLANG_FORMAT)
    session.run("ruff", "check", *PYTHON_PATHS)
    session.run("ruff", "format", "--check", *PYTHON_PATHS)
    session.run("clang-format", "--dry-run", "--Werror", *_cpp_files())


@nox.session(reuse_venv=True)
def fix(session):
    """Apply what lint checks: ruff's fixes and formatting, clang-format in place."""
    session.install(RUFF, CLANG_FORMAT)
    session.run("ruff", "check", "--fix", *PYTHON_PATHS)
    session.run("ruff", "format", *PYTHON_PATHS)
    session.run("clang-format", "-i", *_cpp_files())
