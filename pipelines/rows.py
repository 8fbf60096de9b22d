"""Write small tables built from Python rows to Parquet.

These tables hold a few rows per trace or run. DuckDB writes them from the rows as they are;
pyarrow would import pandas the first time it builds an array from Python objects (~0.3 s a
process), which is a tenth of a 200 MB trace's parse.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb


def sql_path(path: Path) -> str:
    """``path`` as a SQL string literal, for a COPY target or a glob (neither can be a parameter)."""
    return "'" + str(path).replace("'", "''") + "'"


def write_rows(path: Path, columns: dict[str, str], rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` to ``path`` with ``columns`` (name → DuckDB type); a key a row lacks is null."""
    struct = ", ".join(f'"{name}" {kind}' for name, kind in columns.items())
    with duckdb.connect() as con:
        rows_query = f"select row.* from (select unnest($rows::struct({struct})[]) as row)"
        con.execute(f"copy ({rows_query}) to {sql_path(path)} (format parquet)", {"rows": rows}).fetchall()
