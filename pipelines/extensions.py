"""DuckDB extensions from their PyPI wheels, so nothing is downloaded at run time (workers are often offline)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
from pathlib import Path
from typing import Any

import duckdb

# Extensions whose signature DuckDB has checked in this process (see extension_connection), and the lock that makes
# a connection wait for a check under way rather than check again.
_CHECKED: set[str] = set()
_CHECKING = threading.Lock()


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
    with _CHECKING:
        checked = set(names) <= _CHECKED
        con = duckdb.connect(config=config | ({"allow_unsigned_extensions": True} if checked else {}))
        load_extensions(con, names)
        _CHECKED.update(names)
    return con


def check_ahead(names: tuple[str, ...]) -> None:
    """Have DuckDB check the signatures of ``names`` on a thread of its own, for a process whose first connection
    loading them comes after work that leaves a core idle meanwhile (``tracelake ingest``: ~0.2 s for ducklake and
    sqlite, otherwise spent between a run's parse and its marts)."""

    def check() -> None:
        # A failure here is the first real connection's to report, with its context.
        with contextlib.suppress(Exception):
            extension_connection(names, {}).close()

    threading.Thread(target=check, name="extension-check", daemon=True).start()
