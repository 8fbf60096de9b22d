"""One self-contained HTML report per run (``LAKE/reports/<run_id>.html``): charts over the run's tables.

Sections whose mart is not in the lake say so instead of drawing; the rest read raw tables.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from html import escape

import duckdb

from pipelines.lake import ALIAS, Lake
from pipelines.rows import sql_path
from tracelake.charts import format_ns, line_chart, stacked_bars

TOP_KERNELS = 15
MAX_POINTS = 1500  # per memory series: enough for the curve's shape, small enough for a light page

STEP_PHASES = ("kernel_ns", "memcpy_ns", "memset_ns", "communication_ns", "runtime_ns", "dataloader_ns",
               "cpu_exec_ns", "other_ns")
OVERLAP_PARTS = ("computation_ns", "overlapping_ns", "communication_ns", "other_ns")

_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 900px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; width: 100%; }
td, th { padding: 2px 8px; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } .missing { color: #888; font-style: italic; }
"""


@dataclass(frozen=True)
class Section:
    """One titled part of a report: a chart and/or a table, or a note saying why it is empty."""

    title: str
    body: str


def _rows(con: duckdb.DuckDBPyConnection, sql: str, run_id: str) -> list[tuple]:
    return con.execute(sql, {"run_id": run_id}).fetchall()


def _missing(table: str) -> str:
    return f'<p class="missing">{table} is not in this lake yet, so this chart is left out.</p>'


def _per_rank(con: duckdb.DuckDBPyConnection, run_id: str, table: str, columns: tuple[str, ...], how: str) -> str:
    """Stacked bars per rank of ``columns`` of a per-step mart, aggregated with ``how`` (avg or sum)."""
    select = ", ".join(f"{how}({c})" for c in columns)
    rows = _rows(con, f"select rank, {select} from {table} where run_id = $run_id group by rank order by rank", run_id)
    if not rows:
        return '<p class="missing">no steps in this run.</p>'
    return stacked_bars([(f"rank {r[0]}", {c.removesuffix("_ns"): float(v or 0) for c, v in zip(columns, r[1:])})
                         for r in rows])


def _memory(con: duckdb.DuckDBPyConnection, run_id: str) -> str:
    rows = _rows(con, """
        select rank, device_type, device_id, ts_ns, total_allocated_bytes from memory_events
        where run_id = $run_id and total_allocated_bytes is not null order by rank, device_type, device_id, ts_ns
    """, run_id)
    if not rows:
        return '<p class="missing">the traces hold no memory events (profile_memory=True records them).</p>'
    start = min(r[3] for r in rows)
    series: dict[str, list[tuple[float, float]]] = {}
    for rank, device_type, device_id, ts, allocated in rows:
        device = "CPU" if device_type == 0 else f"GPU{device_id}"
        series.setdefault(f"rank {rank} {device}", []).append((ts - start, allocated))
    thinned = {name: points[:: max(1, len(points) // MAX_POINTS)] for name, points in series.items()}
    return line_chart(thinned)


def _top_kernels(con: duckdb.DuckDBPyConnection, run_id: str) -> str:
    rows = _rows(con, f"""
        select name, count(*) as calls, sum(dur_ns) as total_ns from kernels where run_id = $run_id
        group by name order by total_ns desc limit {TOP_KERNELS}
    """, run_id)
    if not rows:
        return '<p class="missing">no GPU kernels in this run.</p>'
    table = "".join(
        f'<tr><td>{escape(name)}</td><td class="num">{calls}</td><td class="num">{format_ns(total)}</td></tr>'
        for name, calls, total in rows
    )
    return (stacked_bars([(name, {"time": float(total)}) for name, _, total in rows])
            + f"<table><tr><th>kernel</th><th>calls</th><th>total</th></tr>{table}</table>")


def _summary(con: duckdb.DuckDBPyConnection, run_id: str, views: set[str]) -> str:
    if "runs" not in views:
        return _missing("runs")
    cursor = con.execute("select * from runs where run_id = $run_id", {"run_id": run_id})
    names = [d[0] for d in cursor.description]
    row = cursor.fetchone()
    return "<table>" + "".join(f"<tr><th>{escape(n)}</th><td>{escape(str(v))}</td></tr>"
                               for n, v in zip(names, row or ()) if not n.startswith("run_id")) + "</table>"


def report_sections(con: duckdb.DuckDBPyConnection, run_id: str) -> list[Section]:
    """Every section of the run's report, over a connection holding the run's raw and mart views."""
    views = {row[0] for row in con.execute("select view_name from duckdb_views()").fetchall()}
    return [
        Section("Run", _summary(con, run_id, views)),
        Section("Step time breakdown per rank (mean per step)",
                _per_rank(con, run_id, "step_breakdown", STEP_PHASES, "avg") if "step_breakdown" in views
                else _missing("step_breakdown")),
        Section("Computation, communication and overlap per rank (whole run)",
                _per_rank(con, run_id, "comm_overlap_by_step", OVERLAP_PARTS, "sum") if "comm_overlap_by_step" in views
                else _missing("comm_overlap_by_step")),
        Section("Memory allocated over time", _memory(con, run_id)),
        Section(f"Top {TOP_KERNELS} kernels by total time", _top_kernels(con, run_id)),
    ]


def render_report(run_id: str, sections: list[Section]) -> str:
    """The sections as one HTML page with everything inline."""
    body = "".join(f"<section><h2>{escape(s.title)}</h2>{s.body}</section>" for s in sections)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>tracelake run {escape(run_id)}</title>'
            f"<style>{_STYLE}</style></head><body><h1>Run {escape(run_id)}</h1>{body}</body></html>")


def write_report(lake: Lake, run_id: str) -> str:
    """Build the run's report from its committed tables and write it to ``LAKE/reports/<run_id>.html``; returns its URL."""
    with lake.connect(read_only=True) as con:
        for layer, table in con.execute(
            "select schema_name, table_name from duckdb_tables() where database_name = $alias", {"alias": ALIAS}
        ).fetchall():
            con.execute(f"create temp view {table} as select * from {ALIAS}.{layer}.{table} where run_id = {sql_path(run_id)}")
        html = render_report(run_id, report_sections(con, run_id))
    path = posixpath.join(lake.root, "reports", f"{run_id}.html")
    lake.fs.makedirs(posixpath.dirname(path), exist_ok=True)
    lake.fs.pipe_file(path, html.encode())
    return lake.url_of(posixpath.relpath(path, lake.root))
