"""The package's shape (DESIGN.md, "Layer order"): every import statement of rnnfast, at module
level and inside functions (``import x``, ``from . import y``, relative and absolute, and
``importlib.import_module`` with a constant name), goes from a module to one at its own level or
below; no import cycle; ``rnnfast.nn`` never imports ``rnnfast.io``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "rnnfast"

# DESIGN.md's "Layer order", lowest first: a module imports from its own level or below, never
# above. A subpackage's modules have its level. rnnfast itself (its __init__) is the top.
LAYER_ORDER = {
    1: (
        "_core",
        "_config",
        "_allocator",
        "_threadpool",
        "_validation",
        "_parameters",
        "_state_dict",
        "_version",  # __version__, which _config and _threadpool report
        "precision",  # the products a float32 kernel call multiplies with (a _core switch)
    ),
    2: ("functional", "reference", "losses", "decoding", "data", "datasets", "optim"),
    3: ("metrics", "nn"),
    # onnx: rnnfast.io.onnx's other name; _torch_*: the PyTorch bridge's private helpers
    4: (
        "io",
        "quantize",
        "diagnostics",
        "torch",
        "_torch_recompute",
        "_torch_ops",
        "_torch_layer_norm",
        "_torch_autocast",
        "_torch_weight_cache",
        "onnx",
    ),
    5: ("training", "keras"),
    6: ("distributed",),
    7: ("demo", "__main__", ""),  # "": the package's __init__
}
LEVEL = {name: level for level, names in LAYER_ORDER.items() for name in names}


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
# The compiled module, by its stub: the extension itself is in the source tree only after an
# in-place build (CI installs it into site-packages). It is imported and imports nothing.
MODULES["rnnfast._core"] = PACKAGE / "_core.pyi"


def level_of(module):
    """The level of ``rnnfast.a.b...``: that of ``a`` (``rnnfast`` itself: the top)."""
    top = module.split(".")[1] if "." in module else ""
    return LEVEL.get(top)


def _resolve(importer, is_package, node):
    """The rnnfast modules an ``ImportFrom`` names: ``from X import a`` imports the module
    ``X.a`` where there is one, else the name ``a`` from ``X`` (which imports ``X``)."""
    if node.level:
        base = importer.split(".") if is_package else importer.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target != "rnnfast" and not target.startswith("rnnfast."):
        return []
    found = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        found.append(sub if sub in MODULES or _is_package(sub) else target)
    return found


def _is_package(name):
    return name in MODULES and MODULES[name].name == "__init__.py"


def imports_of(module, source):
    """``[(line, imported module)]`` of every import in ``source`` (the text of ``module``):
    module level and inside functions and classes, rnnfast's modules only."""
    is_package = _is_package(module) or module == "rnnfast"
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            found += [(node.lineno, t) for t in _resolve(module, is_package, node)]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name)
                for a in node.names
                if a.name == "rnnfast" or a.name.startswith("rnnfast.")
            ]
        elif _is_import_module_call(node):
            name, package = node.args[0].value, _package_argument(module, is_package, node)
            if name.startswith("."):
                dots = len(name) - len(name.lstrip("."))
                base = package.split(".")
                base = base[: len(base) - (dots - 1)]
                name = ".".join(base + ([name.lstrip(".")] if name.lstrip(".") else []))
            if name == "rnnfast" or name.startswith("rnnfast."):
                found.append((node.lineno, name))
    return found


def _is_import_module_call(node):
    func = getattr(node, "func", None)
    return (
        isinstance(node, ast.Call)
        and isinstance(func, (ast.Attribute, ast.Name))
        and getattr(func, "attr", getattr(func, "id", None)) == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def _package_argument(module, is_package, node):
    """The package a relative ``import_module(name, package)`` resolves against: the module's
    own package (``__package__``, or ``__name__`` in a package's __init__)."""
    return module if is_package else module.rsplit(".", 1)[0]


def _graph():
    """{module: [(line, imported module)]} over rnnfast's Python modules."""
    return {
        name: [(line, t) for line, t in imports_of(name, path.read_text("utf-8")) if t != name]
        for name, path in MODULES.items()
        if path.suffix == ".py"
    }


def _where(module, line):
    return f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}"


def test_every_module_has_a_level():
    missing = sorted(m for m in MODULES if level_of(m) is None)
    assert not missing, (
        f"modules without a level in LAYER_ORDER (add them, and to DESIGN.md): {missing}"
    )


def test_imports_follow_the_layer_order():
    """A module imports only modules of its own level or below."""
    upward = [
        f"{_where(module, line)}: {module} (level {level_of(module)}) imports {target} "
        f"(level {level_of(target)})"
        for module, imports in _graph().items()
        for line, target in imports
        if level_of(target) is not None and level_of(target) > level_of(module)
    ]
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle():
    """Counting the imports inside functions too. (Importing a submodule runs its package's
    __init__ first; that is not an import the submodule makes, and is not counted.)"""
    edges = {m: {t for _, t in imports if t in MODULES} for m, imports in _graph().items()}
    cycles = _cycles(edges)
    lines = []
    for component in cycles:
        inside = sorted(
            {
                f"  {_where(m, line)}: {m} -> {t}"
                for m in component
                for line, t in _graph()[m]
                if t in component
            }
        )
        lines.append(" <-> ".join(component) + "\n" + "\n".join(inside))
    assert not cycles, "import cycles:\n" + "\n".join(lines)


def test_nn_never_imports_io():
    offenders = [
        f"{_where(m, line)}: {m} imports {t}"
        for m, imports in _graph().items()
        if m == "rnnfast.nn" or m.startswith("rnnfast.nn.")
        for line, t in imports
        if t == "rnnfast.io" or t.startswith("rnnfast.io.")
    ]
    assert not offenders, "\n".join(offenders)


# ---- the reader itself ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "module, source, expected",
    [
        ("rnnfast.nn.recurrent.rnn", "from ... import functional", ["rnnfast.functional"]),
        ("rnnfast.nn.recurrent.rnn", "from ...io import persistence", ["rnnfast.io.persistence"]),
        (
            "rnnfast.nn.recurrent.rnn",
            "from ...io.persistence import save",
            ["rnnfast.io.persistence"],
        ),
        ("rnnfast.nn.recurrent.rnn", "from ..masking import call_rnn", ["rnnfast.nn.masking"]),
        ("rnnfast.nn.recurrent.stack", "from ...data import reversal_index", ["rnnfast.data"]),
        ("rnnfast.nn", "from .recurrent.rnn import RNN", ["rnnfast.nn.recurrent.rnn"]),
        ("rnnfast.nn", "from . import seq2seq", ["rnnfast.nn.seq2seq"]),
        ("rnnfast._config", "def f():\n    from . import __version__", ["rnnfast"]),
        ("rnnfast.training", "import rnnfast.io.persistence", ["rnnfast.io.persistence"]),
        ("rnnfast.training", "import numpy, onnx", []),
        (
            "rnnfast.nn.recurrent.rnn",
            "class A:\n    def f(self):\n        from ...io import interop\n",
            ["rnnfast.io.interop"],
        ),
        ("rnnfast.onnx", "importlib.import_module('.io.onnx', __package__)", ["rnnfast.io.onnx"]),
        ("rnnfast", "importlib.import_module('.onnx', __name__)", ["rnnfast.onnx"]),
    ],
)
def test_the_reader_finds_every_import(module, source, expected):
    assert [t for _, t in imports_of(module, source)] == expected


def test_the_cycle_finder_reports_cycles_through_function_level_imports():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
