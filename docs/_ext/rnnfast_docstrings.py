"""Workarounds that let the package's docstrings, as they are, build with ``-W``.

Most of rnnfast's docstrings are valid reStructuredText and numpydoc; a few are written as
plain text (an indented equation or code block without ``::``, a ``*features`` shape, a
hanging-indent table) or use a section numpydoc does not know (and would drop). Rather than
edit them, this extension mends each docstring before numpydoc reads it:

- a section numpydoc does not know and would drop is kept: one that names a known section
  ("Example", "Arguments") is renamed to it where the docstring lacks that section; any other
  moves, under a rubric of its own title, to the end of the docstring's Notes;
- prose that numpydoc would read as entries of a section such as Parameters (each line in
  bold) continues the entry it belongs to, or moves to the end of Notes;
- a paragraph laid out in aligned columns (a plain-text table) becomes a literal block;
- a docstring that docutils reports a problem in is mended where the problem is: a block whose
  indentation docutils cannot read becomes a literal block (as the plain text meant it), a
  ``*`` that would open emphasis is escaped.

Only docstrings with such a problem change; the build log lists each (``sphinx -v`` or the
summary line at the end), so a docstring that is fixed at its source stops appearing there.
Anything else still fails the build, as ``-W`` should.
"""

from __future__ import annotations

import inspect
import io
import re
import warnings

import docutils.core
import docutils.nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

# numpydoc's sections (numpydoc.docscrape.NumpyDocString.sections), the ones a docstring can open
KNOWN_SECTIONS = {
    "Parameters",
    "Attributes",
    "Methods",
    "Returns",
    "Yields",
    "Receives",
    "Other Parameters",
    "Raises",
    "Warns",
    "Warnings",
    "See Also",
    "Notes",
    "References",
    "Examples",
}
# sections whose entries numpydoc reads as "name : type" lines with indented descriptions
ENTRY_SECTIONS = KNOWN_SECTIONS - {"Warnings", "See Also", "Notes", "References", "Examples"}

INDENTATION_PROBLEMS = (
    "Unexpected indentation",
    "Block quote ends without a blank line",
    "Definition list ends without a blank line",
    "Bullet list ends without a blank line",
    "Enumerated list ends without a blank line",
    "Field list ends without a blank line",
)
MARKUP_PROBLEMS = ("Inline emphasis start-string", "Inline strong start-string")
# roles and directives are Sphinx's: plain docutils does not know them, the build does
IGNORED = (
    "Unknown interpreted text role",
    "Unknown directive type",
    "No role entry",
    "No directive entry",
    "Trying",
    "Title underline too short",
    "Possible title underline, too short",
    "Unexpected section title",
)

_mended: dict[str, list[str]] = {}


def _indent(line):
    return len(line) - len(line.lstrip())


def _section_at(lines, i):
    """The numpydoc section header at line i (a title over a run of ``-`` at least as long)."""
    if i + 1 >= len(lines):
        return None
    title, rule = lines[i].strip(), lines[i + 1].strip()
    # numpydoc's test (docscrape.NumpyDocString._is_at_section)
    if title and (rule.startswith("-" * len(title)) or rule.startswith("=" * len(title))):
        return title
    return None


# Unknown titles that name a known section: renamed, when the docstring lacks that section
ALIASES = {
    "Arguments": "Parameters",
    "Args": "Parameters",
    "Example": "Examples",
    "Return": "Returns",
    "Raise": "Raises",
    "Note": "Notes",
    "Warning": "Warnings",
    "See also": "See Also",
}
_COLUMNS = re.compile(r"\S {2,}\S")


def _rename_aliases(lines):
    """Rename the sections titled as ALIASES says (a title and its rule)."""
    titles = {_section_at(lines, i): i for i in range(len(lines))}
    renamed = []
    for title, i in titles.items():
        target = ALIASES.get(title)
        if target and target not in titles:
            lines[i] = lines[i].replace(title, target)
            lines[i + 1] = "-" * len(target)
            renamed.append(f"{title} as {target}")
    return renamed


def _append_to_notes(lines, extra):
    """``lines`` with ``extra`` at the end of the Notes section (made when there is none)."""
    at = next((i for i in range(len(lines)) if _section_at(lines, i) == "Notes"), None)
    if at is None:
        return [*lines, "", "Notes", "-----", "", *extra]
    end = at + 2
    while end < len(lines) and _section_at(lines, end) is None:
        end += 1
    return [*lines[:end], "", *extra, *lines[end:]]


def _keep_unknown_sections(lines):
    """Move the sections numpydoc does not know to the end of Notes, each under a rubric."""
    kept, moved, current = [], [], None
    i = 0
    while i < len(lines):
        title = _section_at(lines, i)
        if title is not None:
            current = title if title in KNOWN_SECTIONS else None
            if current is None:
                moved.append([title])
                i += 2
                continue
        if current is None and moved:
            moved[-1].append(lines[i])
        else:
            kept.append(lines[i])
        i += 1
    if not moved:
        return lines, []
    extra = []
    for title, *block in moved:
        extra += [f".. rubric:: {title}", "", *block, ""]
    return _append_to_notes(kept, extra), [block[0] for block in moved]


# An entry's first line as numpydoc reads it: names (``x``, ``x, y``, ``*args``, ``**kwargs``),
# then optionally `` : type``.
_ENTRY = re.compile(r"^\*{0,2}[A-Za-z_][\w.]*(\s*,\s*\*{0,2}[A-Za-z_][\w.]*)*(\s+:(\s.*)?)?$")
_TYPE_ONLY = {"Returns", "Yields"}  # sections whose entries may be a type alone, any text


def _tables_as_literal(lines):
    """Free-text paragraphs of two or more lines, every one in aligned columns (a plain-text
    table, which reST would run together into one paragraph), as literal blocks."""
    out, changed, i = [], False, 0
    while i < len(lines):
        if _section_at(lines, i) is not None:
            out += lines[i : i + 2]
            i += 2
            continue
        j = i
        while j < len(lines) and lines[j].strip() and _section_at(lines, j) is None:
            j += 1
        if j == i:  # a blank line
            out.append(lines[i])
            i += 1
            continue
        run = lines[i:j]
        before = next((line for line in reversed(out) if line.strip()), "")
        if (
            not before.rstrip().endswith("::")  # already a literal block
            and _section_of(lines, i) not in ENTRY_SECTIONS | {"See Also"}
            and len(run) >= 2
            and all(_indent(line) == _indent(run[0]) for line in run)
            and all(_COLUMNS.search(line.strip()) for line in run)
            and not run[0].lstrip().startswith(("..", ">>>"))
        ):
            out += [" " * _indent(run[0]) + "::", "", *("    " + line for line in run)]
            changed = True
        else:
            out += run
        i = j
    return out, changed


def _tidy_entries(lines):
    """Prose that numpydoc would read as entries of an entry section, each of its lines in bold:

    - a line that continues an entry's first line (no blank line, not indented) is that entry's
      description (indented), or, after a Returns entry that is a type alone, part of it;
    - a paragraph of prose after an entry (a blank line, then lines that are not entries) moves
      to the end of Notes, where numpydoc renders it as text.
    """
    out, notes, current = [], [], None
    state = None  # the last line: "entry", "type", "continued", "description" or a blank
    i = 0
    while i < len(lines):
        title = _section_at(lines, i)
        if title is not None:
            current, state = title, "blank"
            out += lines[i : i + 2]
            i += 2
            continue
        line = lines[i]
        if current not in ENTRY_SECTIONS:
            out.append(line)
            i += 1
            continue
        if not line.strip():
            state = "blank" if state != "description" else "description-blank"
            out.append(line)
        elif _indent(line) > 0:
            state = "description"
            out.append(line)
        elif state in ("entry", "type") and not _ENTRY.match(line.strip()):
            if state == "type":
                out[-1] = out[-1].rstrip() + " " + line.strip()
            else:
                out.append("    " + line.strip())
                state = "continued"
        elif state == "continued" and not _ENTRY.match(line.strip()):
            out.append("    " + line.strip())
        elif _ENTRY.match(line.strip()):
            state = "entry"
            out.append(line)
        elif current in _TYPE_ONLY:  # an entry that is a type alone ("ndarray of int64, ...")
            state = "type"
            out.append(line)
        elif i + 1 < len(lines) and lines[i + 1].strip() and _indent(lines[i + 1]) > 0:
            state = "entry"  # not a name, but described: numpydoc reads it as an entry
            out.append(line)
        else:  # a paragraph of prose in the section: to Notes
            j = i
            while j < len(lines) and lines[j].strip() and _section_at(lines, j) is None:
                j += 1
            notes += [*lines[i:j], ""]
            i, state = j, "blank"
            continue
        i += 1
    changed = out != lines or bool(notes)
    return (_append_to_notes(out, notes) if notes else out), changed


def _free_text(lines):
    """The docstring as docutils should check it: numpydoc's entry sections ("name : type"
    lines, which numpydoc rewrites) blanked, and the section titles too; line numbers kept."""
    out, current = list(lines), None
    for i in range(len(lines)):
        title = _section_at(lines, i)
        if title is not None:
            current = title
            out[i] = ""
            out[i + 1] = ""
        elif current in ENTRY_SECTIONS or current == "See Also":
            out[i] = ""
    return out


def _entries(lines):
    """(first line, dedented lines) of each entry's "name : type" line and of each
    description in numpydoc's entry sections: numpydoc renders both as text."""
    found, current, i = [], None, 0
    while i < len(lines):
        title = _section_at(lines, i)
        if title is not None:
            current, i = title, i + 2
            continue
        if current in ENTRY_SECTIONS and lines[i].strip() and _indent(lines[i]) == 0:
            found.append((i, [lines[i]]))
        if current in ENTRY_SECTIONS and lines[i].strip() and _indent(lines[i]) > 0:
            j = i
            while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > 0):
                j += 1
            while j > i and not lines[j - 1].strip():
                j -= 1
            width = min(_indent(line) for line in lines[i:j] if line.strip())
            found.append((i, [line[width:] for line in lines[i:j]]))
            i = j
            continue
        i += 1
    return found


def _problems(lines, env):
    """(line index, message) of what docutils reports in the docstring's free text and in
    each entry of its numpydoc sections."""
    found = _check(_free_text(lines), env, 0)
    for first, text in _entries(lines):
        found += _check(text, env, first)
    return sorted(found)


def _check(lines, env, offset):
    stream = io.StringIO()
    doctree = docutils.core.publish_doctree(
        "\n".join(lines),
        settings_overrides={
            "report_level": 2,
            "halt_level": 5,
            "warning_stream": stream,
            "file_insertion_enabled": False,
            "raw_enabled": False,
            "env": env,
        },
    )
    found = []
    for msg in doctree.findall(docutils.nodes.system_message):
        text = msg.astext()
        if msg["level"] < 2 or any(s in text for s in IGNORED) or msg.get("line") is None:
            continue
        found.append((offset + msg["line"] - 1, text))
    return found


def _run(lines, i):
    """The run of non-blank lines around line i: (first, last)."""
    i = min(max(i, 0), len(lines) - 1)
    while i > 0 and not lines[i].strip():
        i -= 1
    a = b = i
    while a > 0 and lines[a - 1].strip():
        a -= 1
    while b + 1 < len(lines) and lines[b + 1].strip():
        b += 1
    return a, b


def _section_of(lines, i):
    """The numpydoc section line i is in (None before the first)."""
    current = None
    for j in range(i + 1):
        title = _section_at(lines, j)
        if title is not None:
            current = title
    return current


def _as_literal(lines, i):
    """Make the block around line i a literal block; False if it cannot be done safely."""
    a, b = _run(lines, i)
    if _section_of(lines, a) in ENTRY_SECTIONS and _indent(lines[a]) == 0:
        # an entry's "name : type" line opens the run: keep it, the description is the block
        a += 1
        if a > b:
            return False
    if any(_section_at(lines, j) for j in range(a, b + 1)):
        return False
    base = min(_indent(line) for line in lines[a : b + 1] if line.strip())
    prev = next((lines[j] for j in range(a - 1, -1, -1) if lines[j].strip()), None)
    outer = _indent(prev) if prev is not None else 0
    if a > 0 and lines[a - 1].strip() and _section_of(lines, a) in ENTRY_SECTIONS:
        outer = base  # inside a description: the literal block opens at its indentation
    shift = 0 if base > outer else outer + 4 - base
    block = [(" " * shift + line) if line.strip() else line for line in lines[a : b + 1]]
    opener = [" " * min(outer, base) + "::", ""]
    if a > 0 and lines[a - 1].strip():
        opener.insert(0, "")
    lines[a : b + 1] = opener + block
    return True


_STAR = re.compile(r"(?<![\\*\w`])\*(?=[\w(])")


def _escape_stars(lines, i):
    """Escape, in the paragraph around line i, each ``*`` that would open emphasis (outside
    ``literals``)."""
    a, b = _run(lines, i)
    changed = False
    for j in range(a, b + 1):
        parts = re.split(r"(``.*?``|`[^`]*`)", lines[j])
        new = "".join(p if k % 2 else _STAR.sub(r"\\*", p) for k, p in enumerate(parts))
        changed |= new != lines[j]
        lines[j] = new
    return changed


def _is_type_docstring(obj, lines):
    own = inspect.getdoc(type(obj))
    return bool(own) and "\n".join(lines).strip() == inspect.cleandoc(own).strip()


_FIELD_ALIAS = re.compile(r"^Alias for field number \d+$")


def mend(app, what, name, obj, options, lines):
    """autodoc-process-docstring, before numpydoc: the workarounds above."""
    if len(lines) == 1 and _FIELD_ALIAS.match(lines[0]):
        lines[:] = []  # a NamedTuple field: its name and type say it all
        return
    if what in ("data", "attribute") and _is_type_docstring(obj, lines):
        lines[:] = []  # a constant's type's docstring (dict's, tuple's), not the constant's
        return
    done = []
    new = list(lines)
    renamed = _rename_aliases(new)
    if renamed:
        done.append("sections renamed: " + ", ".join(renamed))
    new, sections = _keep_unknown_sections(new)
    if sections:
        done.append("sections numpydoc does not know kept in Notes: " + ", ".join(sections))
    new, tidied = _tidy_entries(new)
    if tidied:
        done.append("prose in an entry section kept as prose")
    new, tables = _tables_as_literal(new)
    if tables:
        done.append("plain-text table as a literal block")
    for _ in range(20):
        problems = _problems(new, app.env)
        if not problems:
            break
        line, text = problems[0]
        if any(p in text for p in INDENTATION_PROBLEMS):
            fixed, kind = _as_literal(new, line), "plain-text block as a literal block"
        elif any(p in text for p in MARKUP_PROBLEMS):
            fixed, kind = _escape_stars(new, line), "'*' escaped"
        else:
            fixed = False
        if not fixed:
            break  # left as it is: the build reports it
        if kind not in done:
            done.append(kind)
    if done:
        lines[:] = new
        _mended[name] = done
        logger.verbose("rnnfast docstring workaround: %s: %s", name, "; ".join(done))


def summarize(app, exception):
    if exception is None and _mended:
        logger.info(
            "rnnfast docstring workarounds applied to %d docstrings: %s",
            len(_mended),
            ", ".join(sorted(_mended)),
        )


def setup(app):
    # numpydoc also parses each raw docstring for its signature (mangle_signature), before the
    # mending above, and says so with Python warnings about the sections mended here; those
    # parses only look for a signature, so their warnings are noise.
    warnings.filterwarnings(
        "ignore",
        message="(Unknown section|potentially wrong underline)",
        category=UserWarning,
        module=r"numpydoc\.docscrape",
    )
    # numpydoc's mangle_docstrings listens at the default priority, 500: run before it
    app.connect("autodoc-process-docstring", mend, priority=400)
    app.connect("build-finished", summarize)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
