"""Parse a trace file straight through ``parse_trace``, and compare two parses table by table."""

from __future__ import annotations

from pathlib import Path

import duckdb
import fsspec

from pipelines.identity import TraceFile
from pipelines.parse import ParsedTrace, ParseSettings, parse_trace


def parse_file(path: Path, workdir: Path, settings: ParseSettings | None = None) -> ParsedTrace:
    trace = TraceFile(url=str(path), run_id="r", trace_id="t", size_bytes=path.stat().st_size)
    return parse_trace(fsspec.filesystem("file"), str(path), trace, workdir=workdir, settings=settings or ParseSettings())


def table_differences(one: ParsedTrace, other: ParsedTrace) -> dict[str, object]:
    """Per table whose schema or rows differ between the two parses: what differs (empty when they are the same)."""
    assert one.table_files.keys() == other.table_files.keys()
    con = duckdb.connect()
    differences: dict[str, object] = {}
    for table, path in one.table_files.items():
        other_path = other.table_files[table]
        schema = con.execute(f"describe select * from '{path}'").fetchall()
        other_schema = con.execute(f"describe select * from '{other_path}'").fetchall()
        if schema != other_schema:
            differences[table] = (schema, other_schema)
            continue
        (rows,) = con.execute(
            f"select count(*) from ((from '{path}' except all from '{other_path}') union all "
            f"(from '{other_path}' except all from '{path}'))"
        ).fetchone()
        if rows:
            differences[table] = f"{rows} rows differ"
    return differences
