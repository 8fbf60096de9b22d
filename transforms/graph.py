"""Run order of SQL models: topological over inferred dependencies, never by file name."""

from __future__ import annotations

from collections import defaultdict
from graphlib import CycleError, TopologicalSorter

from transforms.models import SqlModel


def upstream_closure(models: dict[str, SqlModel], selected: set[str]) -> set[str]:
    """``selected`` plus every model they read, transitively."""
    todo, seen = list(selected), set()
    while todo:
        name = todo.pop()
        if name in seen or name not in models:
            continue
        seen.add(name)
        todo.extend(models[name].deps)
    return seen


def run_order(models: dict[str, SqlModel], known_tables: set[str], selected: set[str] | None = None) -> list[str]:
    """Models to run, dependencies first.

    Raises:
        ValueError: a model reads a name that is neither a raw table nor a model, or models form a cycle.
    """
    for model in models.values():
        unknown = model.deps - set(models) - known_tables
        if unknown:
            raise ValueError(f"{model.path}: reads unknown tables {sorted(unknown)}")
    names = upstream_closure(models, selected) if selected is not None else set(models)
    sorter = TopologicalSorter({n: models[n].deps & set(models) for n in names})
    try:
        return list(sorter.static_order())
    except CycleError as exc:
        raise ValueError(f"SQL models form a cycle: {' -> '.join(exc.args[1])}") from exc


def release_points(models: dict[str, SqlModel], order: list[str]) -> dict[str, list[str]]:
    """Per model of ``order``: the models no later one reads, to be dropped once it has run.

    A view is read when its readers run, so reading a view also reads what the view reads.
    """

    def scanned(name: str) -> set[str]:
        reads = set()
        for dep in models[name].deps & set(models):
            reads.add(dep)
            if models[dep].materialized == "view":
                reads |= scanned(dep)
        return reads

    last_reader = {name: name for name in order}  # nothing reads it: released right after it runs
    for name in order:
        for dep in scanned(name) & last_reader.keys():
            last_reader[dep] = name
    released: dict[str, list[str]] = defaultdict(list)
    for name, reader in last_reader.items():
        released[reader].append(name)
    return released


def mart_dependencies(models: dict[str, SqlModel], mart: str, known_tables: set[str]) -> tuple[set[str], set[str]]:
    """The raw tables and other marts that ``mart`` reads, through any staging or intermediate models."""
    raw, marts = set(), set()
    todo, seen = list(models[mart].deps), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in models and models[name].layer == "marts":
            marts.add(name)
        elif name in models:
            todo.extend(models[name].deps)
        elif name in known_tables:
            raw.add(name)
    return raw, marts
