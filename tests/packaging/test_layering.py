"""The import layering, read from the code itself: the parse and the lake (``pipelines``) import nothing above them,
the SQL runner and the reports (``transforms``) only ``pipelines``, Dagster's wiring (``dagster_project``) both, and
only it imports Dagster; no module imports itself back through others (no cycles)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from tests.support.servers import ROOT

PACKAGES = ("pipelines", "transforms", "dagster_project", "tracelake")
# What each package may import of the project's packages.
ALLOWED = {
    "pipelines": {"pipelines"},
    "transforms": {"pipelines", "transforms"},
    "dagster_project": {"pipelines", "transforms", "dagster_project"},
    "tracelake": set(PACKAGES),
}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(module: str, path: Path) -> set[str]:
    """Every module name ``path`` imports, at any depth of its code (functions' deferred imports included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_each_package_imports_only_the_layers_below_it() -> None:
    wrong = []
    for module, path in _modules().items():
        package = module.split(".")[0]
        for name in _imports(module, path):
            top = name.split(".")[0]
            if top in PACKAGES and top not in ALLOWED[package]:
                wrong.append(f"{module} imports {name}")
            if top == "dagster" and package != "dagster_project":
                wrong.append(f"{module} imports {name}: only dagster_project may import Dagster")
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_itself_back() -> None:
    modules = _modules()
    graph = {module: {name for name in _imports(module, path) if name in modules and name != module}
             for module, path in modules.items()}
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"an import cycle: {' -> '.join(exc.args[1])}") from None
