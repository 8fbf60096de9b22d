"""DuckDB extensions from their PyPI wheels, so nothing is downloaded at run time (workers are often offline)."""

from __future__ import annotations

import functools
import importlib
import os
import tempfile
from pathlib import Path
from typing import Any

import duckdb

# Extensions whose signature DuckDB has checked in this process: later internal connections load them unchecked.
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
    """Load ``names`` into ``con``, installing each from its wheel (a file copy, no network) where it is not
    installed or the installed copy fails to load (damaged, or replaced by a file that fails its signature check)."""
    for name in names:
        try:
            con.execute(f"load {name}")
        except duckdb.Error as first:
            try:
                con.execute(f"force install '{extension_file(name)}'")
                con.execute(f"load {name}")
            except duckdb.Error as exc:
                raise RuntimeError(f"DuckDB extension {name} does not load ({first}); installing it again from "
                                   f"{extension_file(name)} failed too: {exc}") from exc


@functools.cache
def _extension_directory() -> str | None:
    """Where DuckDB installs extensions: its own folder under the user's home, or, for an account without a home
    (a service's ``HOME=/nonexistent``), one under the temporary folder."""
    if Path.home().is_dir():
        return None
    return str(Path(tempfile.gettempdir()) / f"tracelake-duckdb-extensions-{os.getuid()}")


def extension_connection(
    names: tuple[str, ...], config: dict[str, Any], *, for_users: bool = False
) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB with ``names`` loaded.

    DuckDB checks an extension's signature on every load by hashing its 20-40 MB file (ducklake's and sqlite's:
    0.14 s, 0.25 s of CPU). Once it has checked a file in this process, tracelake's own later connections load it
    without checking again. A connection handed to users (``for_users``: notebooks, ``tracelake sql``) always
    checks, and installs and loads nothing of itself afterwards.
    """
    if "extension_directory" not in config and _extension_directory():
        config = config | {"extension_directory": _extension_directory()}
    trusted = not for_users and set(names) <= _CHECKED
    if for_users:
        config = config | {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    con = duckdb.connect(config=config | {"allow_unsigned_extensions": True} if trusted else config)
    load_extensions(con, names)
    _CHECKED.update(names)
    return con
