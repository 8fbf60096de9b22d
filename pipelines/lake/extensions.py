"""DuckDB extensions from their PyPI wheels, so nothing is downloaded at run time (workers are often offline)."""

from __future__ import annotations

import functools
import importlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import duckdb

# Extensions whose signature DuckDB has checked in this process: later internal connections load them unchecked.
_CHECKED: set[str] = set()
# Beside the installed extensions: each one's file as it was when DuckDB last checked its signature (path, size,
# modification time, inode), so that a later process of the same account loads that same file unchecked.
CHECKED_RECORD = "tracelake-checked.json"


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
    record = Path(config.get("extension_directory") or Path.home() / ".duckdb" / "extensions") / CHECKED_RECORD
    trusted = not for_users and (set(names) <= _CHECKED or _checked_before(record, names))
    if for_users:
        config = config | {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    con = duckdb.connect(config=config | {"allow_unsigned_extensions": True} if trusted else config)
    load_extensions(con, names)
    if not trusted and not set(names) <= _CHECKED:
        _remember_checked(record, con, names)
    _CHECKED.update(names)
    return con


def _stamp(path: str) -> list[int]:
    stat = os.stat(path)
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino]


def _checked_before(record: Path, names: tuple[str, ...]) -> bool:
    """Whether another process of this account had DuckDB check each of ``names`` in the file installed now.

    The check hashes 20-40 MB per extension (0.3 s of every command that opens the lake); a file changed since
    (reinstalled, replaced) no longer matches its record and is checked again. The record lives with the files it
    vouches for: whoever can rewrite it can rewrite the extensions, and Python's own packages are not checked."""
    try:
        checked = json.loads(record.read_text())
        return all(_stamp(checked[name]["path"]) == checked[name]["stamp"] for name in names)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _remember_checked(record: Path, con: duckdb.DuckDBPyConnection, names: tuple[str, ...]) -> None:
    """Record ``names``, which ``con`` loaded with their signatures checked, by the name they were loaded by (an
    alias such as ``sqlite`` for ``sqlite_scanner`` included); best effort: a read-only home skips it."""
    try:
        checked = json.loads(record.read_text())
    except (OSError, ValueError):
        checked = {}
    loaded = con.execute("select extension_name, aliases, install_path from duckdb_extensions() where loaded "
                         "and install_path like '%.duckdb_extension'").fetchall()
    try:
        for extension, aliases, path in loaded:
            for name in set(names) & {extension, *aliases}:
                checked[name] = {"path": path, "stamp": _stamp(path)}
        written = record.with_suffix(f".{os.getpid()}.tmp")
        written.parent.mkdir(parents=True, exist_ok=True)
        written.write_text(json.dumps(checked))
        os.replace(written, record)
    except OSError:
        pass
