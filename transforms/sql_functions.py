"""Python functions that SQL models call, defined on a DuckDB connection."""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow as pa


def replace_function(
    con: duckdb.DuckDBPyConnection, name: str, function: Callable[..., Any], parameters: list[Any], returns: str,
    **options: Any,
) -> None:
    """Define ``name`` in ``con`` as ``function``, replacing an earlier definition (models may be built twice on one
    connection); ``options`` go to :meth:`duckdb.DuckDBPyConnection.create_function`."""
    with contextlib.suppress(duckdb.InvalidInputException):  # not defined on this connection yet
        con.remove_function(name)
    con.create_function(name, function, parameters, returns, **options)


def single_array(column: pa.ChunkedArray) -> pa.Array:
    """An argument of an Arrow function as one array. DuckDB hands each argument as one chunk, which
    ``combine_chunks`` would copy whole (29 MB more at ``op_tree``'s peak on a 234 MB trace)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


# glibc's, where it is the C library (None elsewhere: musl, macOS)
_MALLOC_TRIM = getattr(ctypes.CDLL(None), "malloc_trim", None)


def release_freed_memory() -> None:
    """Return to the OS the memory that functions' numpy arrays freed. They run on DuckDB's threads, whose glibc
    arenas keep freed blocks resident, so the next model's peak would stack on the last one's (~60 MB at the
    models' peak on a 234 MB trace)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
