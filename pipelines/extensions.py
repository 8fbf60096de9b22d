"""DuckDB extensions from their PyPI wheels, so nothing is downloaded at run time (workers are often offline)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
from pathlib import Path
from typing import Any

import duckdb

# Extensions whose signature DuckDB has checked in this process (see extension_connection).
_CHECKED: set[str] = set()
# Beside an installed extension file: the stat of the file as it was when DuckDB last checked its signature.
VERIFIED_SUFFIX = ".tracelake-verified"


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


def _installed_files(con: duckdb.DuckDBPyConnection, names: tuple[str, ...]) -> list[Path] | None:
    """The files DuckDB loads ``names`` from (a name may be an alias: ``sqlite``); None while one is not installed."""
    rows = con.execute(
        "select install_path from duckdb_extensions()"
        " where installed and (list_contains($names, extension_name) or list_has_any($names, aliases))",
        {"names": list(names)},
    ).fetchall()
    return [Path(path) for (path,) in rows] if len(rows) == len(names) else None


def _stamp(path: Path) -> str:
    """What changes whenever the file's bytes do: any write or replacement moves its ctime, which no one can set."""
    st = path.stat()
    return f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns}"


def _record(path: Path) -> Path:
    return path.with_name(path.name + VERIFIED_SUFFIX)


def _verified_unchanged(path: Path) -> bool:
    try:
        return _record(path).read_text() == _stamp(path)
    except OSError:
        return False


def _mark_verified(paths: list[Path]) -> None:
    """Record that DuckDB has checked these files as they are now; where the folder is read-only, nothing."""
    for path in paths:
        with contextlib.suppress(OSError):
            record = _record(path)
            temporary = record.with_name(f"{record.name}.{os.getpid()}")
            temporary.write_text(_stamp(path))
            temporary.replace(record)  # whole or not at all, whichever process writes it


def _checked_before(names: tuple[str, ...], config: dict[str, Any]) -> bool:
    """Whether DuckDB has checked each of the files ``names`` load from, in any process, as they are now."""
    with duckdb.connect(config=config) as con:
        files = _installed_files(con, names)
    return files is not None and all(map(_verified_unchanged, files))


def extension_connection(names: tuple[str, ...], config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB with ``names`` loaded.

    DuckDB checks an extension's signature on every load by hashing its 20-40 MB file (ducklake's and sqlite's:
    0.14 s, 0.25 s of CPU). A file it has checked is loaded without checking again (``allow_unsigned_extensions``)
    later in the process, and in later processes while the file is unchanged since the check (same inode, size,
    mtime and ctime, recorded beside it: :data:`VERIFIED_SUFFIX`); whoever could forge the record could replace
    any file of its folder, and so every extension, anyway. A file changed since is checked again, and refused if
    it fails. A connection that runs users' SQL turns external access off, which refuses any further LOAD.
    """
    if set(names) <= _CHECKED or _checked_before(names, config):
        con = duckdb.connect(config=config | {"allow_unsigned_extensions": True})
        load_extensions(con, names)
    else:
        con = duckdb.connect(config=config)
        load_extensions(con, names)
        _mark_verified(_installed_files(con, names) or [])
    _CHECKED.update(names)
    return con
