"""The code's arrows run one way, and its rooms stay small (issue 34; the code map in docs/development.md).

Read from the source (every `import` and `from ... import`, at module level or inside a function, `TYPE_CHECKING`
ones included), never by importing it:

1. **No import circle** anywhere in the code: scheduling/, gangweb/, bench/, client/, localcluster/, scripts/.
2. **Arrows run downward.** The worker side (`reconcile/`) and everything below it never import the web side
   (`services/`, `api/`, `views/`, `forms/`) nor `scheduling/tasks.py`; `kube/` (the client) never imports what
   reads its answers (`observe/`) nor the worker (`reconcile/`). LAYERS lists each rule.
3. **Small rooms.** No module over MAX_LINES lines outside migrations and tests, and `scheduling/services/` holds at
   most MAX_SERVICES top-level modules (files and folders): the rest lives in its domain folders.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODE = ("scheduling", "gangweb", "bench", "client", "localcluster", "scripts")
MAX_LINES = 500
MAX_SERVICES = 8
WEB = ("scheduling.services", "scheduling.api", "scheduling.views", "scheduling.forms")
# importer package -> packages it must not import (a module of a package counts as the package)
LAYERS = {
    "scheduling.reconcile": (*WEB, "scheduling.tasks"),
    "scheduling.backends": (*WEB, "scheduling.tasks", "scheduling.reconcile"),
    "scheduling.observe": (*WEB, "scheduling.tasks", "scheduling.reconcile"),
    "scheduling.queueing": (*WEB, "scheduling.tasks", "scheduling.reconcile"),
    "scheduling.podspec": (*WEB, "scheduling.tasks", "scheduling.reconcile"),
    "scheduling.db": (*WEB, "scheduling.tasks", "scheduling.reconcile"),
    "scheduling.work": (*WEB, "scheduling.tasks", "scheduling.reconcile"),
    "scheduling.kube": (*WEB, "scheduling.tasks", "scheduling.reconcile", "scheduling.observe"),
    "scheduling.models": (*WEB, "scheduling.tasks", "scheduling.reconcile"),
    "scheduling.placement": (*WEB, "scheduling.tasks", "scheduling.reconcile"),
}


def module_name(path: Path) -> str:
    """`scheduling/kube/client.py` -> `scheduling.kube.client`; a package's __init__.py names the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files() -> dict[str, Path]:
    """{module: file} of every Python file of CODE, migrations left out."""
    out = {}
    for top in CODE:
        for path in (ROOT / top).rglob("*.py"):
            if "migrations" not in path.parts and "__pycache__" not in path.parts:
                out[module_name(path)] = path
    return out


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that `module` imports. `from pkg import name` names the module `pkg.name` when that
    is a module, else `pkg`; a name that is not a module of `known` resolves to its nearest known parent."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            names = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    """{module: the modules it imports} over CODE."""
    files = source_files()
    known = set(files)
    return {module: imports_of(module, path, known) for module, path in files.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@pytest.fixture(scope="module")
def graph():
    found = import_graph()
    # the scan sees the code (it would pass vacuously otherwise)
    assert len(found) > 250
    assert "scheduling.observe.why_pending" in found["scheduling.reconcile.status"]
    return found


def test_no_import_circle_anywhere(graph):
    assert circles(graph) == []


def test_arrows_run_downward(graph):
    offenders = [f"{importer} imports {imported}"
                 for importer, imported_set in sorted(graph.items())
                 for layer, forbidden in LAYERS.items() if within(importer, layer)
                 for imported in sorted(imported_set) if any(within(imported, f) for f in forbidden)]
    assert offenders == []


def test_no_module_over_the_line_limit():
    over = {module: n for module, path in source_files().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert over == {}


def test_services_keeps_its_domains_in_folders():
    services = ROOT / "scheduling" / "services"
    top = sorted(p.name for p in services.iterdir()
                 if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").exists()))
    assert len(top) <= MAX_SERVICES, top
    assert {"jobs", "queues", "templates", "clusters", "access"} <= set(top)


@pytest.mark.parametrize(("graph_", "expected"), [
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b", "c"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
])
def test_a_circle_is_found(graph_, expected):
    assert circles(graph_) == expected


def test_an_import_inside_a_function_counts(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from . import b\n")
    (package / "b.py").write_text("from .a import f\n")
    known = {"pkg", "pkg.a", "pkg.b"}
    assert imports_of("pkg.a", package / "a.py", known) == {"pkg.b"}
    assert imports_of("pkg.b", package / "b.py", known) == {"pkg.a"}
