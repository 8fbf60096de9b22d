"""Run order of SQL models: topological over inferred dependencies, never by file name."""

from __future__ import annotations

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


def readers(models: dict[str, SqlModel], names: list[str]) -> dict[str, set[str]]:
    """Per model of ``names``: the models of ``names`` that read it, so it must exist until they have run.

    A view is read when its readers run, so reading a view also reads what the view reads.
    """

    def scanned(name: str) -> set[str]:
        reads = set()
        for dep in models[name].deps & set(models):
            reads.add(dep)
            if models[dep].materialized == "view":
                reads |= scanned(dep)
        return reads

    read_by: dict[str, set[str]] = {name: set() for name in names}
    for name in names:
        for dep in scanned(name) & read_by.keys():
            read_by[dep].add(name)
    return read_by


def chain_lengths(read_by: dict[str, set[str]], order: list[str]) -> dict[str, int]:
    """Per model of ``order`` (dependencies first): the number of models on the longest chain of readers from it
    (``read_by``, from :func:`readers`), itself included. Starting the longest chains first keeps every worker busy
    to the end."""
    lengths: dict[str, int] = {}
    for name in reversed(order):
        lengths[name] = 1 + max((lengths[reader] for reader in read_by[name]), default=0)
    return lengths


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
