"""The package's shape (DESIGN.md, "Package layout"): no import cycle among rnnfast's modules at
load time, and ``rnnfast.nn`` does not import ``rnnfast.io`` (saving and loading reach io
lazily, inside functions)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "rnnfast"


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _load_time_imports(path):
    """The rnnfast modules ``path`` imports at module level (not inside functions)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("rnnfast"):
                found.add(target)
                found.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("rnnfast"))
    return found


def _graph():
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        graph[name] = {m for m in _load_time_imports(path) if m in modules and m != name}
    return graph


def test_no_import_cycle_among_submodules():
    """Cycles through a package's own __init__ (which re-exports its submodules) are not
    counted: importing a submodule runs its package's __init__ first in any case."""
    graph = _graph()
    for name, deps in graph.items():
        graph[name] = {d for d in deps if not name.startswith(d + ".") and d != "rnnfast"}
    state = {}

    def visit(node, stack):
        state[node] = "active"
        for dep in sorted(graph[node]):
            if state.get(dep) == "active":
                cycle = stack[stack.index(dep) :] + [dep] if dep in stack else [node, dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, stack + [dep])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def test_nn_does_not_import_io_at_load_time():
    graph = _graph()
    offenders = {
        name: sorted(d for d in deps if d.startswith("rnnfast.io"))
        for name, deps in graph.items()
        if name.startswith("rnnfast.nn")
    }
    assert not {k: v for k, v in offenders.items() if v}, offenders
