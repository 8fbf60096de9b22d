"""Python functions that SQL models call, defined on a DuckDB connection."""

from __future__ import annotations

import contextlib
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
