"""Python functions that SQL models call, defined on a DuckDB connection."""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable
from typing import Any

import duckdb


def replace_function(
    con: duckdb.DuckDBPyConnection, name: str, function: Callable[..., Any], parameters: list[str], returns: str,
    **options: Any,
) -> None:
    """Define ``name`` in ``con`` as ``function``, replacing an earlier definition (models may be built twice on one
    connection); ``options`` go to :meth:`duckdb.DuckDBPyConnection.create_function`."""
    with contextlib.suppress(duckdb.InvalidInputException):  # not defined on this connection yet
        con.remove_function(name)
    con.create_function(name, function, parameters, returns, **options)


# glibc's, where it is the C library (None elsewhere: musl, macOS)
_MALLOC_TRIM = getattr(ctypes.CDLL(None), "malloc_trim", None)


def release_freed_memory() -> None:
    """Return to the OS the memory that functions' numpy arrays freed. They run on DuckDB's threads, whose glibc
    arenas keep freed blocks resident, so the next model's peak would stack on the last one's (~60 MB at the
    models' peak on a 234 MB trace)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
