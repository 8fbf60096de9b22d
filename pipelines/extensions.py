"""DuckDB extensions from their PyPI wheels, so nothing is downloaded at run time (workers are often offline)."""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from typing import Any

import duckdb

# Extensions whose signature DuckDB has checked in this process (see extension_connection).
_CHECKED: set[str] = set()


@functools.cache
def extension_file(name: str) -> str:
    """The ``.duckdb_extension`` file shipped by the ``duckdb-extension-<name>`` wheel for this DuckDB version."""
    package = importlib.import_module(f"duckdb_extension_{name}")
    root = Path(next(iter(package.__path__)))
    matches = sorted(root.glob(f"extensions/v{duckdb.__version__}/{name}.duckdb_extension"))
    if not matches:
        raise RuntimeError(
            f"duckdb-extension-{name} has no build for DuckDB {duckdb.__version__} under {root}: "
            f"install duckdb-extension-{name}=={duckdb.__version__}"
        )
    return str(matches[0])


def load_extensions(con: duckdb.DuckDBPyConnection, names: tuple[str, ...]) -> None:
    """Load ``names`` into ``con``, installing each from its wheel the first time (a file copy, no network)."""
    for name in names:
        try:
            con.execute(f"load {name}")
        except duckdb.IOException:
            con.execute(f"install '{extension_file(name)}'")
            con.execute(f"load {name}")


def extension_connection(names: tuple[str, ...], config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB with ``names`` loaded.

    DuckDB checks an extension's signature on every load by hashing its 20-40 MB file (~0.1 s each, several
    times per ingest). Once it has checked a file in this process, later connections load it without checking
    again (``allow_unsigned_extensions``); a connection that runs users' SQL turns external access off, which
    refuses any further LOAD.
    """
    checked = set(names) <= _CHECKED
    con = duckdb.connect(config=config | ({"allow_unsigned_extensions": True} if checked else {}))
    load_extensions(con, names)
    _CHECKED.update(names)
    return con
