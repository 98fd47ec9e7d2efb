"""``.. rnnfast-if-public:: NAME``: its content only where ``rnnfast.NAME`` exists.

The reference documents the public names through their public paths (``rnnfast.JordanRNN``,
``rnnfast.diagnostics``). A name that a branch of the project does not have yet (or no longer)
would make autodoc fail the ``-W`` build; inside this directive it is left out instead, and the
build log says so.
"""

from __future__ import annotations

import importlib

from docutils import nodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

logger = logging.getLogger(__name__)


def public(name):
    """Whether ``rnnfast.<name>`` (a dotted path below the package) can be reached."""
    obj = importlib.import_module("rnnfast")
    for part in name.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            try:
                obj = importlib.import_module(f"{obj.__name__}.{part}")
            except (AttributeError, ImportError):
                return False
    return True


class IfPublic(SphinxDirective):
    required_arguments = 1
    has_content = True

    def run(self):
        name = self.arguments[0]
        self.env.note_reread()  # whether the name exists can change between builds
        if not public(name):
            logger.info("rnnfast-if-public: rnnfast.%s is not in this rnnfast; left out", name)
            return []
        container = nodes.container()
        nested_parse_with_titles(self.state, self.content, container, self.content_offset)
        return container.children


def setup(app):
    app.add_directive("rnnfast-if-public", IfPublic)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
