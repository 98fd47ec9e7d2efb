"""The version is written once, in python/rnnfast/_version.py: the installed metadata, the docs'
release and the changelog's newest entry all say what ``rnnfast.__version__`` says.

The release check (tools/release_check.py) runs this file in the environments it installs the
wheel and the sdist into, where the metadata is the built package's own."""

from __future__ import annotations

import re
import runpy
import sys
from importlib import metadata
from pathlib import Path

import pytest

import rnnfast

ROOT = Path(__file__).resolve().parent.parent


def test_the_installed_metadata_is_the_package_version():
    assert metadata.version("rnnfast") == rnnfast.__version__


def test_the_docs_release_is_the_package_version(monkeypatch):
    # conf.py puts its extensions' folder on sys.path; the test's sys.path is restored after.
    monkeypatch.setattr(sys, "path", list(sys.path))
    conf = runpy.run_path(str(ROOT / "docs" / "conf.py"))
    assert conf["release"] == conf["version"] == rnnfast.__version__


def test_pyproject_reads_the_version_from_the_package():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in config["project"]
    assert "version" in config["project"]["dynamic"]
    source = config["tool"]["scikit-build"]["metadata"]["version"]
    assert source["provider"] == "scikit_build_core.metadata.regex"
    assert (ROOT / source["input"]).resolve() == (
        ROOT / "python" / "rnnfast" / "_version.py"
    ).resolve()


def test_the_changelog_starts_at_the_package_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    newest = re.search(r"^## (\S+)", text, flags=re.MULTILINE)
    assert newest is not None, "CHANGELOG.md has no '## <version>' entry"
    assert newest.group(1) == rnnfast.__version__
