"""``tracelake runs``, ``tables`` and ``files``: what a lake holds, what its tables mean, and which files hold them."""

from __future__ import annotations

import sys
from typing import Any

from pipelines.lake.lake import Lake, LakeError
from pipelines.lake.read import table_files, table_names
from tracelake.output import print_table, write_result
from tracelake.suggest import did_you_mean
from transforms.docs import DIFFERENCES_TITLE, GUIDE, TableDoc, all_docs, column_doc, differences, first_sentence
from transforms.units import unit_of

RUNS_QUERY = """
    select run_id, trace_count as traces, ranks, world_size, backend, device_name as device,
           first_ts_ns as started_ns, last_ts_ns - first_ts_ns as span_ns
    from runs order by first_ts_ns, run_id
"""


RUNS_HEADERS = {"started_ns": "started", "span_ns": "span"}


def list_runs(
    lake_url: str, *, options: dict[str, Any] | None = None, catalog: str | None = None, fmt: str = "table"
) -> int:
    """Print the lake's runs (id, traces, ranks, device, when); returns the exit code."""
    from tracelake.query import run_query

    with Lake(lake_url, options, catalog).connect(read_only=True) as con:
        committed = "runs" in table_names(con)
    if not committed:  # a catalog whose first ingest never committed (it failed, or was killed)
        raise LakeError(f"the lake {lake_url} holds no run yet: no ingest has committed to it. Run "
                        f"tracelake ingest SOURCE --lake {lake_url}")
    columns, rows = run_query(RUNS_QUERY, lake_url, options=options, catalog=catalog)
    if fmt == "table":  # a date and a span for people; csv and json keep the exact ns under their names
        print_table([RUNS_HEADERS.get(c, c) for c in columns], rows, units=columns)
    else:
        write_result(columns, rows, fmt)
    return 0


def _lake_columns(
    lake_url: str | None, options: dict[str, Any] | None, catalog: str | None
) -> dict[str, list[str]]:
    """Each table's columns as the lake holds them (empty without a lake)."""
    if lake_url is None:
        return {}
    from tracelake.query import run_query

    _, rows = run_query("select table_name, column_name from duckdb_columns() where database_name = 'lake' "
                        "order by table_name, column_index", lake_url, options=options, catalog=catalog)
    columns: dict[str, list[str]] = {}
    for table, column in rows:
        columns.setdefault(table, []).append(column)
    return columns


def _describe(doc: TableDoc | None, name: str, columns: list[str], fmt: str, *, lake: bool) -> None:
    rows = [(c, unit_of(c), column_doc(doc, c)) for c in columns]
    if fmt != "table":
        write_result(["column", "unit", "meaning"], rows, fmt)
        return
    if doc:
        print(f"{name} ({doc.layer}): {doc.summary}")
        if doc.source:
            print(f"definition follows: {doc.source}")
        for text in doc.differences:
            print(f"differs on purpose: {text}")
        print()
    print_table(["column", "unit", "meaning"], rows, footer=False)
    if not lake:
        print("(documented columns; with --lake LAKE, every column the lake holds)")


def show_tables(
    table: str | None,
    *,
    lake_url: str | None = None,
    options: dict[str, Any] | None = None,
    catalog: str | None = None,
    fmt: str = "table",
) -> int:
    """Print every table with its one-line meaning and the guide, or one table's columns with units and meanings."""
    docs = all_docs()
    in_lake = _lake_columns(lake_url, options, catalog)
    if table is None:
        names = sorted(set(docs) | set(in_lake), key=lambda n: (docs[n].layer if n in docs else "raw", n))
        rows = [(n, docs[n].layer if n in docs else "", first_sentence(docs[n].summary, 110) if n in docs else "")
                for n in names]
        write_result(["table", "layer", "one row per / what it holds"], rows, fmt)
        if fmt == "table":
            print(f"\n{GUIDE}\n{DIFFERENCES_TITLE}\n")
            for name, text in differences():
                print(f"  {name}: {text}")
            print("\nOne table's columns, units and meaning: tracelake tables TABLE")
        return 0
    if table not in docs and table not in in_lake:
        known = set(docs) | set(in_lake)
        print(f"tracelake tables: no table {table!r}{did_you_mean(table, known)} (tracelake tables lists all "
              f"{len(known)})", file=sys.stderr)
        return 2
    doc = docs.get(table)
    if doc and doc.layer == "fleet":  # a view over every run: its own grain, neither run_id nor rank implied
        documented = [*doc.grain, *doc.columns]
    else:
        documented = ["run_id", *(doc.grain if doc else ()), "rank", *(doc.columns if doc else {})]
    columns = in_lake.get(table) or list(dict.fromkeys(documented))
    _describe(doc, table, columns, fmt, lake=table in in_lake)
    return 0


def list_files(
    table: str | None, lake_url: str, *, options: dict[str, Any] | None = None, catalog: str | None = None
) -> int:
    """Print the data files of ``table`` (default: every table) in the lake's current snapshot, one per line, from
    the catalog; returns the exit code. Reading exactly these gives the catalog's rows: the folders may also hold
    files of a commit in progress, or of an ingest killed before its commit (removed with the run's next ingest, or
    by ``tracelake maintain`` once they are a day old)."""
    with Lake(lake_url, options, catalog).connect(read_only=True) as con:
        files = table_files(con)
    if table is not None and table not in files:
        hint = did_you_mean(table, files) if files else "; it has no table yet"
        print(f"tracelake files: the lake {lake_url} has no table {table!r}{hint} (tracelake tables lists them)",
              file=sys.stderr)
        return 2
    for name in [table] if table else sorted(files):
        for path in files[name]:
            print(path)
    return 0
