"""Sphinx configuration of the rnnfast documentation.

Build (warnings are errors, as in CI and tests/test_docs.py)::

    pip install ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))

import rnnfast  # noqa: E402  (the installed package: its compiled module must be importable)

project = "rnnfast"
author = "the rnnfast developers"
copyright = "the rnnfast developers, MIT license"
version = release = rnnfast.__version__
language = "en"

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
    "rnnfast_docstrings",  # the docstring workarounds, each logged (see _ext/)
    "rnnfast_public",  # .. rnnfast-if-public::, for names not every branch has
    "sphinx.ext.mathjax",
    # MathJax served from the built site (_static/mathjax/), not from a CDN: the PyPI package
    # sphinx-mathjax-offline ships it (the docs extra), so the math renders with no network.
    "sphinx-mathjax-offline",
]

exclude_patterns = ["_build"]
templates_path = []
html_static_path = ["_static"]
html_css_files = ["rnnfast.css"]  # long code lines wrap in the column (docs/_static/)
# furo (PyPI, the docs extra): a fluid content column for wide code and tables, a search page,
# light and dark modes (its toggle); the version is in the title of every page.
html_theme = "furo"
html_title = f"rnnfast {release}"
html_theme_options = {"navigation_with_keys": True}
html_show_sourcelink = False
# The charts' .inc files (docs/charts/, written by bench/docs_charts.py) are included by their
# pages, not documents of their own; their JSON sources are not pages either.
exclude_patterns += ["charts/*.inc"]

# ---- autodoc: the public names, through their public paths ---------------------------------
# A module's members are its __all__ (imported names included: rnnfast.optim.Adam is documented
# as such wherever it is defined), and a class's its public methods and properties, those
# without a docstring too (``zero_grad()``, ``eval()``): the reference lists every public name.
autodoc_default_options = {"members": True, "undoc-members": True, "member-order": "groupwise"}
autodoc_class_signature = "mixed"
autodoc_inherit_docstrings = False  # a method without a docstring of its own shows none
autoclass_content = "class"  # the constructor's arguments are in the class docstrings

# ---- numpydoc ---------------------------------------------------------------------------------
# Members are listed by autodoc (above), not by numpydoc's autosummary tables, which would need
# a stub page per method. Validation stays off: the build checks that the docstrings render,
# not numpydoc's style rules (ruff and review look after those).
numpydoc_show_class_members = False
numpydoc_show_inherited_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False
numpydoc_attributes_as_param_list = True
