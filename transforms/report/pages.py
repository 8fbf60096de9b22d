"""One run's HTML report and the fleet view, rendered from a DuckDB connection where every lake table is a view.

Pure functions of the tables (``tracelake.open_lake(lake)`` gives such a connection). The run report leads with
what to do (``recommendations``, the ``stragglers`` verdict) and then shows where the time went: per-rank step
breakdown, overlap, GPU utilization, memory, and the top kernels, ops and source lines. A section whose table is
not in the lake, or has no rows for the run, is left out or says why. Charts are static SVG (:mod:`transforms.report.charts`);
the only script is the "Open in Perfetto" button's.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import duckdb
import orjson

from pipelines.lake.fleet_views import read_current_fleet_views
from pipelines.lake.lake import ALIAS
from transforms.report import charts
from transforms.report.names import short_kernel_name
from transforms.report.queries import page_query, query_rows
from transforms.units import (
    duration_unit,
    format_bytes,
    format_change,
    format_ns,
    format_ratio,
    format_timestamp_ns,
    format_value,
    plural,
    size_unit,
)

TOP = 15
MEMORY_POINTS = 600  # buckets per memory series: the curve's shape (each bucket keeps its maximum), a light page
PERFETTO_URL = "https://ui.perfetto.dev"
STEP_PARTS = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other")
CPU_STEP_PARTS = ("dataloader", "cpu_exec", "other")  # a run without GPU kernels: the parts a CPU step can have
OVERLAP_PARTS = ("computation", "overlapping", "communication", "other")

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 0 auto; padding: 1.5em 2em; color: #222; max-width: 960px; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ddd; }
.sub { color: #666; margin-top: 0; } .note { color: #666; font-size: .9em; } .missing { color: #888; font-style: italic; }
table { border-collapse: collapse; font-size: .85em; width: 100%; table-layout: auto; margin: .5em 0; }
td, th { padding: 3px 8px; text-align: left; vertical-align: top; overflow-wrap: anywhere; border-bottom: 1px solid #eee; }
th, .id { overflow-wrap: normal; } .worse { color: #b3261e; font-weight: 600; }
th { background: #f6f6f6; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
.short { white-space: nowrap; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; font-size: .9em; }
dt { color: #555; } dd { margin: 0; overflow-wrap: anywhere; }
.chart svg { max-width: 100%; height: auto; } .verdict { font-size: 1.05em; padding: .5em .8em; border-radius: 4px; }
.bad { background: #fdecea; } .good { background: #eaf5ea; } tr.regressed td { background: #fdecea; }
ol.recommendations { padding-left: 1.5em; } li.finding { margin: .3em 0; padding: .3em .5em; border-left: 4px solid #bab0ac; }
li.finding .severity { font-weight: 600; text-transform: uppercase; font-size: .8em; }
li.sev-critical, li.sev-high, li.sev-error { border-color: #b3261e; background: #fdecea; }
li.sev-critical .severity, li.sev-high .severity, li.sev-error .severity { color: #b3261e; }
li.sev-warning, li.sev-medium { border-color: #e8a33d; } li.sev-warning .severity, li.sev-medium .severity { color: #a15c00; }
li.sev-info .severity { color: #555; } .stake { color: #555; font-variant-numeric: tabular-nums; }
span.kernel { cursor: help; } td:has(> span.kernel) { min-width: 14em; }
button.perfetto { cursor: pointer; }
"""

# The documented way to hand Perfetto UI a trace from another page: open it, PING until it answers PONG (its
# listener is then up), post {perfetto: {buffer, title, fileName}}. Traces too large to embed are picked locally.
_PERFETTO_SCRIPT = """
function tracelakeOpenInPerfetto(buffer, fileName, title) {
  const url = document.body.dataset.perfettoUrl, origin = new URL(url).origin;
  const win = window.open(url);
  if (!win) { alert('The browser blocked the Perfetto window: allow pop-ups for this page.'); return; }
  const timer = setInterval(() => win.postMessage('PING', origin), 50);
  window.addEventListener('message', function onPong(event) {
    if (event.source !== win || event.data !== 'PONG') return;
    clearInterval(timer);
    window.removeEventListener('message', onPong);
    win.postMessage({perfetto: {buffer: buffer, title: title, fileName: fileName}}, origin);
  });
}
document.addEventListener('click', (event) => {
  const button = event.target.closest('button.perfetto');
  if (!button) return;
  const data = document.getElementById(button.dataset.trace);
  if (data) {
    const bytes = Uint8Array.from(atob(data.textContent.trim()), (c) => c.charCodeAt(0));
    tracelakeOpenInPerfetto(bytes.buffer, button.dataset.fileName, button.dataset.title);
  } else {
    const input = Object.assign(document.createElement('input'), {type: 'file', accept: '.json,.gz'});
    input.onchange = async () => tracelakeOpenInPerfetto(await input.files[0].arrayBuffer(),
                                                         input.files[0].name, button.dataset.title);
    input.click();
  }
});
"""


@dataclass(frozen=True)
class Section:
    """One titled part of a page: HTML body, or a note saying why it is empty."""

    title: str
    body: str
    anchor: str


class _Tables:
    """What the connection holds: which tables exist, their columns, and row queries bound to one run."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        rows = con.execute("select table_name, column_name from information_schema.columns").fetchall()
        self.columns: dict[str, set[str]] = {}
        for table, column in rows:
            self.columns.setdefault(table, set()).add(column)

    def has(self, table: str) -> bool:
        return table in self.columns

    def column(self, table: str, *names: str) -> str:
        """The first of ``names`` that ``table`` has (a column renamed to the contract's name still reads)."""
        return next((n for n in names if n in self.columns.get(table, ())), names[0])

    def rows(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        cursor = self.con.execute(sql, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _device(device: int | None) -> str:
    """The anchors' device labels: ``GPU0``, ``CPU`` (the tables hold -1 for the CPU)."""
    return "CPU" if device is None or device < 0 else f"GPU{device}"


def _chart(spec: charts.Spec) -> str:
    return f'<div class="chart">{charts.to_svg(spec)}</div>'


def _missing(text: str) -> str:
    return f'<p class="missing">{escape(text)}</p>'


_IDENTIFIERS = frozenset({"rank", "device", "stream", "stage", "source_line", "step"})
"""Columns that say which row a figure is (not figures themselves): never marked."""


def figure_attributes(metric: str, row: Mapping[str, Any], value: Any, *, unit: str, title: str) -> str:
    """The machine-readable marker of one shown figure: ``data-metric`` (``table.column`` it is read from),
    ``data-row`` (its row's grain values, JSON), ``data-value`` (the value as read), ``data-unit`` (the name its units
    are formatted by) and ``data-title`` (what the page calls it). The page-consistency test reads them back."""
    shown = "" if value is None else (repr(value) if not isinstance(value, bool) else str(value).lower())
    return (f' data-metric="{escape(metric)}" data-row="{escape(orjson.dumps(dict(row), default=str).decode())}"'
            f' data-value="{escape(shown)}" data-unit="{escape(unit)}" data-title="{escape(title)}"')


def html_table(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]], *, source: str | None = None,
    grain: Sequence[str] = (),
) -> str:
    """Rows as an HTML table; ``columns`` are (key, header); values in human units by the key's suffix.

    Keys starting ``html_`` hold ready HTML. Numbers are right-aligned; short columns never wrap, so only long
    text (kernel names, paths) takes the line breaks. With ``source`` (the query or mart the rows are), each number
    is marked as that table's column (:func:`figure_attributes`), its row by the ``grain`` columns.
    """
    cells = [{k: r[k] if k.startswith("html_") else escape(format_value(k, r.get(k))) for k, _ in columns}
             for r in rows]
    kinds = {}
    for key, _header in columns:
        if any(isinstance(r.get(key), int | float) and not isinstance(r.get(key), bool) for r in rows):
            kinds[key] = ' class="num"'
        elif not key.startswith("html_") and max((len(c[key]) for c in cells), default=0) <= 32:
            kinds[key] = ' class="short"'
        else:
            kinds[key] = ""

    def cell(row: Mapping[str, Any], key: str, header: str) -> str:
        value = row.get(key)
        if source is None or key.startswith("html_") or key in grain or key in _IDENTIFIERS or key not in row or not (
                value is None or isinstance(value, int | float)):
            return ""
        return figure_attributes(f"{source}.{key}", {g: row.get(g) for g in grain}, value, unit=key, title=header)

    head = "".join(f"<th{kinds[k]}>{escape(h)}</th>" for k, h in columns)
    body = "".join(
        ('<tr class="regressed">' if r.get("_regressed") else "<tr>")
        + "".join(f"<td{kinds[k]}{cell(r, k, h)}>{c[k]}</td>" for k, h in columns) + "</tr>"
        for r, c in zip(rows, cells, strict=True)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# ----------------------------------------------------------------------------------------------- run report


def _summary(t: _Tables, run_id: str) -> str:
    if not t.has("runs"):
        return _missing("the runs table is not in this lake.")
    run = next(iter(t.rows("select * from runs where run_id = $run_id", run_id=run_id)), None)
    if run is None:
        return _missing("this run is not in the runs table.")
    first, last = run.get("first_ts_ns"), run.get("last_ts_ns")
    items = {
        "traces": run.get("trace_count"), "ranks": run.get("ranks"), "world size": run.get("world_size"),
        "backend": run.get("backend"), "device": run.get("device_name"),
        "started": format_timestamp_ns(first) if first else None,
        "trace span": format_ns(last - first) if first and last else None,
        "ingested": run.get("ingested_at"), "source": run.get("source_uri"),
    }
    return "<dl>" + "".join(f"<dt>{escape(k)}</dt><dd>{escape(format_value(k, v))}</dd>" for k, v in items.items()) + "</dl>"


def _recommendations(t: _Tables, run_id: str) -> str | None:
    """One item per finding (report_recommendations), critical first then by the time at stake, styled by severity."""
    if not t.has("recommendations"):
        return None
    rows = query_rows(t.con, "report_recommendations", run_id=run_id)
    if not rows:
        return '<p class="verdict good">No rule fired for this run.</p>'
    items = []
    for r in rows:
        severity = str(r["severity"] or "info").lower()
        ranks = r["ranks"] or []
        where = (f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}") if ranks else ""
        key = {"run_id": r["run_id"], "rule": r["rule"]}
        stake = "" if r["time_at_stake_ns"] is None else (
            f' <span class="stake"{figure_attributes("report_recommendations.time_at_stake_ns", key, r["time_at_stake_ns"], unit="time_at_stake_ns", title="time at stake")}>'
            f"{escape(format_value('time_at_stake_ns', r['time_at_stake_ns']))}</span> at stake")
        items.append(f'<li class="finding sev-{escape(severity)}" data-rule="{escape(r["rule"])}">'
                     f'<span class="severity">{escape(severity)}</span> <b>{escape(r["rule"])}</b>'
                     f'{" (" + escape(where) + ")" if where else ""}{stake}: {escape(str(r["message"] or ""))}</li>')
    note = ('<p class="note">Ranked critical first, then by the time each finding puts at stake on its worst rank '
            "(report_recommendations); one item per rule, with the ranks it fires on.</p>")
    return f'<ol class="recommendations">{"".join(items)}</ol>{note}'


def _headline(t: _Tables, run_id: str) -> str | None:
    """The run's headline metrics (run_metrics), under the names the fleet view and ``tracelake check`` give them."""
    if not t.has("run_metrics"):
        return None
    rows = t.rows("select * from run_metrics where run_id = $run_id", run_id=run_id)
    if not rows:
        return _missing("no headline metrics for this run (see the fleet view for why).")
    rows.sort(key=lambda r: _metric_order(r["metric"]))
    total_steps = t.rows("select count(distinct step) as n from step_health where run_id = $run_id",
                         run_id=run_id)[0]["n"] if t.has("step_health") else 0
    items = []
    for r in rows:
        title = metric_title(r["metric"])
        marker = figure_attributes("run_metrics.value", {"run_id": run_id, "metric": r["metric"]}, r["value"],
                                   unit=r["metric"], title=title)
        over = "" if r["steps"] is None else (
            f" over {plural(r['steps'], 'healthy step')}" + (f" of {total_steps}" if total_steps else ""))
        items.append(f"<dt>{escape(title)}</dt><dd><span{marker}>{escape(format_value(r['metric'], r['value']))}"
                     f'</span><span class="note">{escape(over)}</span></dd>')
    note = ('<p class="note">The figures this run is judged by in the fleet view and <code>tracelake check</code> '
            "(run_metrics): each the median over the run's healthy steps. The sections below show other figures "
            "under their own names (means over every step, torch-tb-profiler's whole profiled window).</p>")
    return f"<dl>{''.join(items)}</dl>{note}"


def _stragglers(t: _Tables, run_id: str, facts: _Facts) -> str | None:
    if not t.has("stragglers"):
        return None
    rows = t.rows("select * from stragglers where run_id = $run_id order by rank", run_id=run_id)
    if not rows:
        if facts.ranks < 2 and not facts.communication:
            return None  # a single process without communication: nothing to say
        partial = facts.world_size is not None and facts.ranks < facts.world_size
        return _why(facts.no_communication(),
                    f"only {facts.ranks} of the job's {facts.world_size} ranks are traced in this run: a straggler is "
                    "found by comparing ranks (ingest every rank's trace into the run)" if partial else "",
                    "one rank only: a straggler is found by comparing ranks" if facts.ranks < 2 else "",
                    "the ranks' collectives could not be matched (quality issue "
                    "check_failed:stragglers:ranks_compared)")
    late = [r for r in rows if r.get("is_straggler")]
    if late:
        names = ", ".join(f"rank {r['rank']}" for r in late)
        verdict = f'<p class="verdict bad">Straggler: {escape(names)} arrived last at most collectives.</p>'
    else:
        verdict = '<p class="verdict good">No straggler: no rank arrives last at collectives more than the others.</p>'
    return verdict + html_table(rows, [("rank", "rank"), ("collectives", "collectives"),
                                       ("arrived_last_count", "arrived last"), ("arrived_last_ratio", "share last"),
                                       ("caused_wait_ns", "wait it caused others"), ("is_straggler", "straggler")],
                                 source="stragglers", grain=("run_id", "rank"))


@dataclass(frozen=True)
class _Facts:
    """What a run's traces hold, to say why a section is empty instead of naming a table."""

    steps: int
    kernels: int
    cpu_ops: int
    ranks: int
    world_size: int | None
    communication: int
    """Collective and point-to-point instances (communication kernels, record_param_comms, gloo ranges)."""
    quality: dict[str, str]
    """The run's quality issue codes, each with its first message."""

    def no_steps(self) -> str:
        return ("the traces hold no ProfilerStep markers (prof.step() in the training loop writes them)"
                if not self.steps else "")

    def no_communication(self) -> str:
        if self.communication:
            return ""
        return ("no collective or point-to-point communication was recorded in this run"
                + (" (a single rank)" if self.ranks == 1 else ""))


def _facts(t: _Tables, run_id: str) -> _Facts:
    def count(table: str, where: str = "true") -> int:
        if not t.has(table):
            return 0
        rows = t.rows(f"select count(*) as n from {table} where run_id = $run_id and {where}", run_id=run_id)
        return int(rows[0]["n"])

    quality = {r["code"]: r["message"] for r in t.rows(
        "select code, any_value(message) as message from quality_issues where run_id = $run_id group by code",
        run_id=run_id)} if t.has("quality_issues") else {}
    ranks, world_size = (0, None)
    if t.has("traces"):
        found = t.rows("select count(distinct rank) as ranks, max(world_size) as world_size from traces "
                       "where run_id = $run_id", run_id=run_id)[0]
        ranks, world_size = found["ranks"], found["world_size"]
    communication = count("comm_by_group") or count("comm_ops") or count("collectives")
    return _Facts(count("steps"), count("kernels"), count("cpu_ops"), ranks, world_size, communication, quality)


def _why(*reasons: str) -> str:
    """The first reason that applies, as a page's note."""
    return _missing(next((r for r in reasons if r), "nothing to show for this run.") + ".")


def _host_communication_note(t: _Tables, run_id: str, rows: Sequence[Mapping[str, Any]], part: str) -> str:
    """Where the chart's communication part is empty but the run communicated on the host (gloo, CPU send/recv):
    that time, under its own name, so the chart is not read as "no communication"."""
    if any(r.get(part) for r in rows) or not t.has("comm_by_group"):
        return ""
    groups = query_rows(t.con, "report_comm_by_group", run_id=run_id)
    host_ns = sum(g["communication_ns"] or 0 for g in groups)
    if not host_ns:
        return ""
    return ('<p class="note">This chart counts communication on the device (GPU kernels), as torch-tb-profiler does; '
            f"this run's communication is on the host (gloo or CPU send/recv): {escape(format_ns(host_ns))} over its "
            'ranks, see <a href="#groups">communication per process group</a>.</p>')


def _per_rank_bars(
    t: _Tables, run_id: str, query: str, parts: Sequence[str], has_steps: bool, empty: str, *, kind: str = ""
) -> str:
    """Mean per step of each part, per rank, stacked (one whole-trace bar when the run has no ProfilerStep), from
    ``query``; its table under the chart; ``empty`` says why when there is none."""
    rows = query_rows(t.con, query, run_id=run_id)
    if not rows:
        return _why(empty)
    bars = [{"label": f"rank {r['rank']}", "category": p, "value_ns": float(r[f"{p}_ns"] or 0)}
            for r in rows for p in parts]
    value_title = "mean time per step" if has_steps else "time over the whole trace"
    note = "" if has_steps else ('<p class="note">This run has no ProfilerStep markers, so there are no steps: '
                                 "the bar is the whole trace window, not a step.</p>")
    chart = _chart(charts.stacked_time_bars(bars, label_title="rank", value_title=value_title))
    over = "per step: the mean over every step of the rank, warm-up included" if has_steps else "over the whole trace"
    table = html_table(rows, [("rank", "rank"), ("steps", "steps"),
                              *[(f"{p}_ns", f"{kind}{p.replace('_', ' ')} {over.split(':')[0]}") for p in parts]],
                       source=query, grain=("run_id", "rank"))
    caption = f'<p class="note">The chart\'s figures, {escape(over)}.</p>'
    return note + chart + _host_communication_note(t, run_id, rows, "communication_ns") + caption + table


def _run_start(t: _Tables, run_id: str) -> int | None:
    if not t.has("runs"):
        return None
    row = t.rows("select first_ts_ns from runs where run_id = $run_id", run_id=run_id)
    return row[0]["first_ts_ns"] if row else None


def _series_label(rank: int, device: int | None, trace_id: str, traces_per_rank: int) -> str:
    label = f"rank {rank} {_device(device)}"
    return f"{label} ({trace_id})" if traces_per_rank > 1 else label


WINDOW_UTILIZATION = "GPU utilization over the profiled window (torch-tb-profiler)"
"""gpu_metrics' utilization: a name of its own beside run_metrics' median-step GPU utilization (:func:`metric_title`)."""


def _gpu_utilization(t: _Tables, run_id: str, start: int | None) -> str | None:
    if not t.has("gpu_utilization_timeline"):
        return None
    rows = query_rows(t.con, "report_gpu_timeline", run_id=run_id)
    if not rows:
        return _missing("no GPU kernels in this run, so no GPU utilization.")
    origin = start if start is not None else min(r["bucket_start_ns"] for r in rows)
    points = [{"series": _series_label(r["rank"], r["device"], r["trace_id"], r["traces_per_rank"]),
               "t_ns": r["bucket_start_ns"] - origin, "y": r["gpu_utilization_ratio"]} for r in rows]
    summary = ""
    if t.has("gpu_metrics"):
        metrics = t.rows("select * from gpu_metrics where run_id = $run_id order by rank, device", run_id=run_id)
        for m in metrics:
            m["device_label"] = _device(m["device"])
        summary = html_table(metrics, [("rank", "rank"), ("trace_id", "trace"), ("device_label", "device"),
                                       ("gpu_utilization_ratio", WINDOW_UTILIZATION),
                                       ("est_sm_efficiency_ratio", "est. SM efficiency"),
                                       ("est_achieved_occupancy_ratio", "est. achieved occupancy")],
                             source="gpu_metrics", grain=("run_id", "trace_id", "device"))
        summary += ('<p class="note">Busy time over the span from the first step\'s start to the last step\'s end, '
                    "warm-up included (gpu_metrics, as torch-tb-profiler's GPU summary); the headline "
                    f"{escape(metric_title('step_gpu_utilization_ratio'))} is the median over the healthy steps.</p>")
    return _chart(charts.time_series(points, y_title="GPU utilization", y_kind="ratio")) + summary


def _memory(t: _Tables, run_id: str, start: int | None, facts: _Facts) -> str | None:
    if not t.has("memory_timeline"):
        return None
    rows = query_rows(t.con, "report_memory_curve", run_id=run_id, points=MEMORY_POINTS)
    if not rows:
        return _missing("the traces hold no memory events (profile_memory=True records them).")
    origin = start if start is not None else min(r["ts_ns"] for r in rows)
    points = [{"series": _series_label(r["rank"], r["device"], r["trace_id"], r["traces_per_rank"]),
               "t_ns": r["ts_ns"] - origin, "y": r["allocated_bytes"]} for r in rows]
    if rows[0]["is_net"]:
        note = ('<p class="note">These memory events carry no allocator totals (the 2021 trace format, quality issue '
                "<code>memory_totals_missing</code>): the curve is the memory allocated since the trace began, "
                "not the allocator's total.</p>")
        return note + _chart(charts.time_series(points, y_title="allocated since the trace began", y_kind="bytes"))
    peaks, table = [], ""
    if t.has("memory_peaks"):
        peak_rows = t.rows("select * from memory_peaks where run_id = $run_id order by rank, trace_id, device",
                           run_id=run_id)
        per_rank: dict[int, set[str]] = {}
        for p in peak_rows:
            per_rank.setdefault(p["rank"], set()).add(p["trace_id"])
        for p in peak_rows:
            p["device_label"] = _device(p["device"])
            if p["peak_ts_ns"] is not None:
                peaks.append({"series": _series_label(p["rank"], p["device"], p["trace_id"], len(per_rank[p["rank"]])),
                              "t_ns": p["peak_ts_ns"] - origin, "y": p["peak_allocated_bytes"],
                              "label": f"peak {format_bytes(p['peak_allocated_bytes'])}"})
        table = html_table(peak_rows, [("rank", "rank"), ("trace_id", "trace"), ("device_label", "device"),
                                       ("peak_allocated_bytes", "peak allocated"),
                                       ("peak_reserved_bytes", "peak reserved"), ("peak_step", "in step")],
                           source="memory_peaks", grain=("run_id", "trace_id", "device"))
    return _chart(charts.time_series(points, y_title="allocated", y_kind="bytes", peaks=peaks)) + table


def _kernel_name_html(name: str) -> str:
    """The short name, the whole one on hover (and in SQL: kernel_stats.kernel_name)."""
    return f'<span class="kernel" title="{escape(name)}">{escape(short_kernel_name(name))}</span>'


def _top_kernels(t: _Tables, run_id: str) -> str | None:
    if not t.has("kernel_stats"):
        return None
    rows = query_rows(t.con, "report_kernels", run_id=run_id, top=TOP)
    if not rows:
        return _missing("no GPU kernels in this run.")
    for i, r in enumerate(rows, 1):
        r["rank_no"] = f"#{i}"
        r["html_name"] = _kernel_name_html(r["kernel_name"])
        r["type"] = str(r["kernel_type"] or "").lower()
    chart = charts.ranked_time_bars([{"name": r["kernel_name"], "short": short_kernel_name(r["kernel_name"]),
                                      "category": charts.kernel_category(r["kernel_type"]),
                                      "value_ns": r["total_ns"]} for r in rows], value_title="total GPU time")
    return _chart(chart) + html_table(rows, [
        ("rank_no", "#"), ("html_name", "kernel"), ("type", "type"), ("calls", "calls"), ("total_ns", "total"),
        ("mean_ns", "mean"), ("min_ns", "min"), ("max_ns", "max"), ("uses_tensor_cores", "tensor cores"),
        ("mean_est_achieved_occupancy_ratio", "kernel's est. achieved occupancy"),
        ("mean_blocks_per_sm", "blocks per SM"),
    ], source="report_kernels", grain=("run_id", "kernel_name"))


def _top_ops(t: _Tables, run_id: str, facts: _Facts) -> str | None:
    if not t.has("op_stats"):
        return None
    rows = query_rows(t.con, "report_ops", run_id=run_id, top=TOP)
    if not rows:
        return _why("GPU-only trace: it holds no CPU operators" if facts.kernels else "",
                    "no operators in this run")
    attributed = any(r["self_device_ns"] for r in rows)
    for i, r in enumerate(rows, 1):
        r["rank_no"] = f"#{i}"
    note = "" if attributed or not facts.kernels else (
        '<p class="note">No kernel launch lies inside a CPU operator in these traces, so no device time can be '
        "attributed to operators: ranked by self CPU time.</p>")
    device_columns = [("self_device_ns", "self device"), ("total_device_ns", "device total")] if facts.kernels else []
    return note + html_table(rows, [("rank_no", "#"), ("op_name", "operator"), ("calls", "calls"), *device_columns,
                                    ("self_cpu_ns", "self CPU"), ("total_cpu_ns", "CPU total")],
                             source="report_ops", grain=("run_id", "op_name"))


def _top_source_lines(t: _Tables, run_id: str, facts: _Facts) -> str | None:
    if not t.has("source_stats"):
        return None
    rows = query_rows(t.con, "report_source_lines", run_id=run_id, top=TOP)
    if not rows:
        return None
    device = [("total_device_ns", "device time")] if facts.kernels else []
    return html_table(rows, [("location", "source line"), ("function", "function"), ("calls", "calls"), *device,
                             ("total_cpu_ns", "CPU time")],
                      source="report_source_lines", grain=("run_id", "source_file", "source_line", "function"))


def _traces(t: _Tables, run_id: str, trace_files: Mapping[str, bytes]) -> str:
    rows = t.rows("select trace_id, rank, source_uri, size_bytes, event_count, window_start_ns, window_end_ns "
                  "from traces where run_id = $run_id order by rank, trace_id", run_id=run_id)
    if not rows:
        return _missing("no traces recorded for this run.")
    embedded = []
    for i, r in enumerate(rows):
        start, end = r.pop("window_start_ns"), r.pop("window_end_ns")
        r["window_ns"] = end - start if start is not None and end is not None else None
        name = (r["source_uri"] or r["trace_id"]).rsplit("/", 1)[-1]
        element = f"trace-{i}"
        data = trace_files.get(r["trace_id"])
        if data is not None:
            embedded.append(f'<script type="application/octet-stream" id="{element}">'
                            f"{base64.b64encode(data).decode()}</script>")
        hint = "" if data is not None else " (choose the file)"
        r["html_open"] = (f'<button class="perfetto" data-trace="{element}" data-file-name="{escape(name)}" '
                          f'data-title="{escape(run_id + " " + r["trace_id"])}">Open in Perfetto{hint}</button>')
    table = html_table(rows, [("trace_id", "trace"), ("rank", "rank"), ("event_count", "events"),
                              ("size_bytes", "size"), ("window_ns", "window"), ("source_uri", "file"),
                              ("html_open", "")])
    note = ('<p class="note">Perfetto UI opens in a new tab and this page hands it the trace; nothing is uploaded. '
            "Traces too large to embed ask for the file.</p>")
    return table + note + "".join(embedded)


def _mfu(t: _Tables, run_id: str) -> str | None:
    """Model FLOPs utilization per rank over its steps (report_mfu), where the traces recorded shapes."""
    if not t.has("step_mfu"):
        return None
    rows = query_rows(t.con, "report_mfu", run_id=run_id)
    if not rows:
        return None
    for r in rows:
        r["peak_text"] = f"{r['peak_tflops_per_s']:.4g} ({r['dtype']})" if r["peak_tflops_per_s"] else "—"
    note = "" if any(r["median_mfu_ratio"] is not None for r in rows) else (
        '<p class="note">No known dense peak for these devices (a CPU, or a GPU not in the peak table): FLOP/s only, '
        "no utilization.</p>")
    return note + html_table(rows, [("rank", "rank"), ("steps", "steps"), ("gpu_model", "device"),
                                    ("tflops_per_s", "mean TFLOP/s"), ("peak_text", "peak TFLOP/s"),
                                    ("min_mfu_ratio", "MFU min"), ("median_mfu_ratio", "MFU median"),
                                    ("max_mfu_ratio", "MFU max")], source="report_mfu", grain=("run_id", "rank"))


def _comm_by_group(t: _Tables, run_id: str) -> str | None:
    """Communication and its exposed part per process group and phase (report_comm_by_group), over the run's ranks."""
    if not t.has("comm_by_group"):
        return None
    rows = query_rows(t.con, "report_comm_by_group", run_id=run_id)
    if not rows:
        return None
    return html_table(rows, [("process_group", "process group"), ("group_desc", "description"), ("phase", "phase"),
                             ("ranks", "ranks"), ("collectives", "collectives"), ("communication_ns", "communicating"),
                             ("exposed_ns", "exposed"), ("worst_exposed_step_ratio", "worst share of a step")],
                      source="report_comm_by_group", grain=("run_id", "process_group", "phase"))


def _pipeline(t: _Tables, run_id: str) -> str | None:
    """Each pipeline stage's bubble against the schedule's ideal (report_pipeline)."""
    if not t.has("pipeline_stages"):
        return None
    rows = query_rows(t.con, "report_pipeline", run_id=run_id)
    if not rows:
        return None
    return html_table(rows, [("stage", "stage"), ("rank", "rank"), ("steps", "steps"),
                             ("bubble_ratio", "bubble"), ("ideal_bubble_ratio", "schedule's ideal"),
                             ("compute_ns", "computing per step"), ("send_recv_ns", "send/recv per step"),
                             ("wait_ns", "waiting for a neighbour per step")],
                      source="report_pipeline", grain=("run_id", "stage", "rank"))


def _query_section(t: _Tables, run_id: str, query: str, table: str, columns: Sequence[tuple[str, str]],
                   note: str = "") -> str | None:
    """A section that is one query's table (None when its mart is not in the lake or has no rows for the run)."""
    if not t.has(table):
        return None
    rows = query_rows(t.con, query, run_id=run_id, top=TOP)
    if not rows:
        return None
    for r in rows:
        if "stream" in r:
            r["stream_label"] = f"stream {r['stream']}"
    body = html_table(rows, columns, source=query, grain=page_query(query).grain)
    return body + (f'<p class="note">{note}</p>' if note else "")


def _idle_time(t: _Tables, run_id: str) -> str | None:
    return _query_section(t, run_id, "report_idle_time", "idle_time", [
        ("rank", "rank"), ("trace_id", "trace"), ("stream_label", "stream"), ("idle_ns", "idle"),
        ("host_wait_ns", "waiting for the host"), ("kernel_wait_ns", "between kernels"), ("other_ns", "other idle"),
        ("host_wait_ratio", "host's share of idle"), ("mean_queue_length", "mean queue"),
        ("max_queue_length", "longest queue")],
        "Idle time per stream by cause (HTA's idle time breakdown) and the launched events queued on it (HTA's "
        "queue length): a stream idle waiting for the host with a short queue is launch-bound.")


def _launch_delay(t: _Tables, run_id: str) -> str | None:
    return _query_section(t, run_id, "report_launch_delay", "kernel_launches", [
        ("rank", "rank"), ("trace_id", "trace"), ("launches", "launches"),
        ("median_launch_delay_ns", "median launch delay"), ("p90_launch_delay_ns", "90th percentile"),
        ("max_launch_delay_ns", "longest"), ("mean_cpu_dur_ns", "mean launch call"),
        ("short_kernel_launches", "kernels shorter than their launch")],
        "From a launch call's end to its device event's start (HTA's kernel launch statistics).")


def _sync_vs_transfer(t: _Tables, run_id: str) -> str | None:
    return _query_section(t, run_id, "report_sync_vs_transfer", "comm_sync_by_step", [
        ("rank", "rank"), ("steps", "steps"), ("communication_ns", "communicating (union over the steps)"),
        ("synchronizing_ns", "waiting for other ranks"), ("data_transfer_ns", "moving data"),
        ("synchronizing_ratio", "share waiting")],
        "Communication split into waiting for the slowest rank and moving data (HTA's communication analysis), "
        "over the rank's steps.")


def _memory_by_op(t: _Tables, run_id: str) -> str | None:
    return _query_section(t, run_id, "report_memory_by_op", "memory_by_op", [
        ("op_name", "operator"), ("allocation_count", "allocations"), ("allocation_bytes", "allocated"),
        ("self_allocation_bytes", "allocated itself"), ("size_increase_bytes", "net increase")])


def _modules(t: _Tables, run_id: str, facts: _Facts) -> str | None:
    device = [("total_device_ns", "module's device time")] if facts.kernels else []
    return _query_section(t, run_id, "report_modules", "module_stats", [
        ("module_path", "module"), ("calls", "calls"), ("total_cpu_ns", "module's CPU total"),
        ("self_cpu_ns", "module's self CPU"), *device])


def run_report_sections(
    con: duckdb.DuckDBPyConnection, run_id: str, *, trace_files: Mapping[str, bytes] | None = None
) -> list[Section]:
    """The report's sections in reading order, each present only when its table exists (and, for the newer
    analyses, has rows for the run). A run without GPU kernels gets a CPU report: no GPU sections, one note why."""
    t = _Tables(con)
    facts = _facts(t, run_id)
    has_steps = bool(facts.steps)
    gpu = bool(facts.kernels)
    start = _run_start(t, run_id)
    no_steps_or_activity = facts.no_steps() if not (facts.kernels or facts.cpu_ops) else ""
    step_parts = STEP_PARTS if gpu else CPU_STEP_PARTS
    parts: list[tuple[str, str, str | None]] = [
        ("Recommendations", "recommendations", _recommendations(t, run_id)),
        ("Headline metrics", "headline", _headline(t, run_id)),
        ("Model FLOPs utilization per rank", "mfu", _mfu(t, run_id)),
        ("Communication per process group and phase", "groups", _comm_by_group(t, run_id)),
        ("Pipeline bubble per stage", "pipeline", _pipeline(t, run_id)),
        ("Stragglers", "stragglers", _stragglers(t, run_id, facts)),
        ("Communication: waiting vs moving data", "sync", _sync_vs_transfer(t, run_id)),
        ("Run", "run", _summary(t, run_id)),
        ("Step time per rank" if has_steps else "Time per rank (no steps)", "steps",
         _per_rank_bars(t, run_id, "report_step_time", step_parts, has_steps,
                        no_steps_or_activity or "no step could be timed in this run")
         if t.has("step_breakdown") else None),
        ("Computation and communication overlap per rank", "overlap",
         _per_rank_bars(t, run_id, "report_overlap", OVERLAP_PARTS, has_steps,
                        facts.no_communication() or no_steps_or_activity or "no step could be timed in this run",
                        kind="overlap: ")
         if t.has("comm_overlap_by_step") and (gpu or facts.communication) else None),
    ]
    if gpu:
        parts += [
            ("GPU utilization over time", "gpu", _gpu_utilization(t, run_id, start)),
            ("GPU idle time and queue length", "idle", _idle_time(t, run_id)),
            ("Kernel launch delay", "launches", _launch_delay(t, run_id)),
        ]
    parts += [("Memory allocated over time, with peaks", "memory", _memory(t, run_id, start, facts))]
    if gpu:
        parts += [(f"Top {TOP} kernels by total GPU time", "kernels", _top_kernels(t, run_id))]
    parts += [
        (f"Top {TOP} operators by {'self device' if gpu else 'self CPU'} time", "ops", _top_ops(t, run_id, facts)),
        (f"Top {TOP} operators by memory allocated", "memory-ops", _memory_by_op(t, run_id)),
        (f"Top {TOP} modules", "modules", _modules(t, run_id, facts)),
        (f"Top {TOP} source lines", "source", _top_source_lines(t, run_id, facts)),
        ("Traces", "traces", _traces(t, run_id, trace_files or {})),
    ]
    sections = [Section(title, body, anchor) for title, anchor, body in parts if body is not None]
    if not gpu and facts.cpu_ops:
        note = ('<p class="note">A CPU report: these traces hold no GPU kernels, so the GPU sections (utilization, '
                "kernels, idle time, launch delay) are left out and operators are ranked by CPU time.</p>")
        run = next(i for i, s in enumerate(sections) if s.anchor == "run")
        sections[run] = Section(sections[run].title, note + sections[run].body, "run")
    return sections


def _page(title: str, subtitle: str, sections: Sequence[Section], *, script: str = "") -> str:
    nav = " · ".join(f'<a href="#{s.anchor}">{escape(s.title)}</a>' for s in sections)
    body = "".join(f'<section id="{s.anchor}"><h2>{escape(s.title)}</h2>{s.body}</section>' for s in sections)
    tail = f"<script>{script}</script>" if script else ""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{escape(title)}</title>'
            f"<style>{_STYLE}</style></head><body data-perfetto-url=\"{PERFETTO_URL}\"><h1>{escape(title)}</h1>"
            f'<p class="sub">{subtitle}</p><nav class="note">{nav}</nav>{body}{tail}</body></html>')


def render_run_report(
    con: duckdb.DuckDBPyConnection, run_id: str, *, trace_files: Mapping[str, bytes] | None = None
) -> str:
    """The run's report as one self-contained HTML page (inline SVG charts, nothing fetched).

    ``trace_files`` (trace_id → the trace file's bytes) are embedded for "Open in Perfetto"; traces not given
    ask the reader for the file instead.
    """
    sections = run_report_sections(con, run_id, trace_files=trace_files)
    subtitle = 'tracelake run report · <a href="index.html">all runs</a>'
    return _page(f"Run {run_id}", subtitle, sections, script=_PERFETTO_SCRIPT)


# ----------------------------------------------------------------------------------------------- fleet view

TABLE_METRICS = ("step_ns", "step_gpu_utilization_ratio", "mfu_ratio", "exposed_communication_ns", "peak_memory_bytes")
"""The run_metrics shown as the fleet view's table columns, in this order; every metric a job has gets a trend panel."""
_TITLES = {"step_ns": "step time (median healthy step)",
           "step_gpu_utilization_ratio": "GPU utilization (median healthy step)", "mfu_ratio": "MFU",
           "exposed_communication_ns": "exposed communication", "peak_memory_bytes": "peak memory"}
FEW_STEPS = 3  # a headline value over fewer healthy steps says how many beside it (one short step can be the median)
SHORT_ID = 24  # a run id up to this long stays on one line; a longer one wraps after . - _ (or every 24 characters)
_BREAK_AFTER = re.compile(r"([._-])")
_LONG_PART = re.compile(r"[^._-]{24}")


def metric_title(metric: str) -> str:
    """A run_metrics metric for people: ``step_ns`` → step time, ``computation_kernel_ns`` → computation kernel time."""
    if metric in _TITLES:
        return _TITLES[metric]
    if metric.endswith("_kernel_ns"):
        return metric.removesuffix("_kernel_ns").replace("_", " ") + " kernel time"
    return metric.replace("_", " ")


def _metric_order(metric: str) -> tuple[int, str]:
    return (TABLE_METRICS.index(metric) if metric in TABLE_METRICS else len(TABLE_METRICS), metric)


@dataclass(frozen=True)
class FleetRun:
    """One run as the fleet view shows it: its ``run_regressions`` rows, by metric."""

    run_id: str
    job: str
    started_ns: int | None
    baseline_run_id: str | None
    metrics: dict[str, dict[str, Any]]

    @property
    def regressed(self) -> list[str]:
        """The metrics ``run_regressions`` flags for this run."""
        return sorted((m for m, row in self.metrics.items() if row["is_regression"]), key=_metric_order)


def fleet_runs(t: _Tables) -> list[FleetRun]:
    """Every run with headline metrics, oldest first, each with its ``run_regressions`` rows (none without the view)."""
    if not t.has("run_regressions"):
        return []
    runs: dict[str, FleetRun] = {}
    for row in t.rows("select * from run_regressions order by started_ns, run_id, metric"):
        run = runs.setdefault(row["run_id"], FleetRun(row["run_id"], row["job"], row["started_ns"],
                                                      row["baseline_run_id"], {}))
        run.metrics[row["metric"]] = row
    return list(runs.values())


def _run_id_html(run_id: str) -> str:
    """A run id that wraps only after ``.``, ``-`` or ``_`` (or inside a part too long for a cell), never mid-word."""
    if len(run_id) <= SHORT_ID:
        return f'<span class="short">{escape(run_id)}</span>'
    return _LONG_PART.sub(lambda m: m.group(0) + "<wbr>", _BREAK_AFTER.sub(r"\1<wbr>", escape(run_id)))


def _run_link(run_id: str) -> str:
    return f'<a class="id" href="{escape(run_id)}.html">{_run_id_html(run_id)}</a>'


def _when(started_ns: int | None) -> str:
    if started_ns is None:
        return "—"
    return dt.datetime.fromtimestamp(started_ns / 1e9, tz=dt.UTC).strftime("%Y-%m-%d %H:%M")


def _metric_cell(run: FleetRun, metric: str, *, with_change: bool = True) -> str:
    """The run's value of ``metric``, and under it the change against the baseline (red where it regressed)."""
    row = run.metrics.get(metric)
    if row is None:
        return "—"
    key = {"run_id": run.run_id, "metric": metric}
    marker = figure_attributes("run_metrics.value", key, row["value"], unit=metric, title=metric_title(metric))
    steps = row.get("steps")
    over = f"the median of {plural(steps, 'healthy step')}" if steps is not None else "measured once per run"
    few = f' <span class="note">({escape(plural(steps, "step"))})</span>' if steps is not None and steps < FEW_STEPS \
        else ""
    value = (f'<span class="short" title="{escape(over)}"><span{marker}>{escape(format_value(metric, row["value"]))}'
             f"</span>{few}</span>")
    if not with_change or row["change_ratio"] is None:
        return value
    change = escape(format_change(row["change_ratio"]))
    kind = "worse" if row["is_regression"] else "note"
    return f'{value}<br><span class="short {kind}">{change}</span>'


def _verdict_text(run: FleetRun) -> str:
    if run.baseline_run_id is None:
        return "first run"
    return "regressed: " + ", ".join(metric_title(m) for m in run.regressed) if run.regressed else "ok"


def _regressions(runs: Sequence[FleetRun], max_regression: float) -> str:
    rule = (f"worse than its baseline by more than {format_ratio(max_regression)} and by more than the two runs' "
            "step-to-step noise (run_regressions)")
    compared = [r for r in runs if r.baseline_run_id is not None]
    rows = [{"html_run": _run_link(r.run_id), "job": r.job, "html_baseline": _run_link(r.baseline_run_id or ""),
             "metric": metric_title(m), "before": format_value(m, r.metrics[m]["baseline_value"]),
             "after": format_value(m, r.metrics[m]["value"]), "change": format_change(r.metrics[m]["change_ratio"]),
             "noise": f"±{100 * r.metrics[m]['noise_ratio']:.1f} %", "_regressed": True}
            for r in reversed(compared) for m in r.regressed]
    if not compared:
        return ('<p class="verdict good">No job has two runs yet, so no run has a baseline to regress against: '
                "ingest a job's next run into the same folder to compare them.</p>")
    if not rows:
        return f'<p class="verdict good">No run regressed: none is {escape(rule)}.</p>'
    regressed = len({row["html_run"] for row in rows})
    verdict = (f'<p class="verdict bad">{escape(plural(regressed, "run"))} regressed: a metric '
               f"{escape(rule)}.</p>")
    return verdict + html_table(rows, [("html_run", "run"), ("job", "job"), ("html_baseline", "baseline"),
                                       ("metric", "metric"), ("before", "baseline value"), ("after", "value"),
                                       ("change", "change"), ("noise", "noise")])


def _repeat_stragglers(t: _Tables) -> str | None:
    """The ranks straggler_history finds to be the straggler in most of their job's recent runs (None: no such rank)."""
    if not t.has("straggler_history"):
        return None
    rows = t.rows("select * from straggler_history where is_repeat_straggler order by job, rank")
    if not rows:
        return None
    for row in rows:
        row["html_job"] = _run_id_html(row["job"])
        row["share"] = f"{row['straggler_runs']} of {row['runs']} runs"
    return html_table(rows, [("html_job", "job"), ("rank", "rank"), ("host", "host"), ("share", "straggler in"),
                             ("caused_wait_ns", "wait it caused"), ("recommendation", "what to look at")])


def _jobs_overview(jobs: Mapping[str, Sequence[FleetRun]], anchors: Mapping[str, str]) -> str:
    rows = []
    for job, job_runs in jobs.items():
        latest = job_runs[-1]
        rows.append({"html_job": f'<a href="#{anchors[job]}">{_run_id_html(job)}</a>', "runs": len(job_runs),
                     "html_latest": _run_link(latest.run_id), "started": _when(latest.started_ns),
                     "html_step": _metric_cell(latest, "step_ns"), "verdict": _verdict_text(latest),
                     "_regressed": bool(latest.regressed)})
    return html_table(rows, [("html_job", "job"), ("runs", "runs"), ("html_latest", "latest run"),
                             ("started", "started (UTC)"), ("html_step", "step time"), ("verdict", "latest verdict")])


def _trend_chart(job_runs: Sequence[FleetRun]) -> str:
    """One panel per metric the job's runs have: each run's value over its start time, regressions in red."""
    metrics = sorted({m for r in job_runs for m in r.metrics}, key=_metric_order)
    points, panels = [], []
    for metric in metrics:
        values = [r.metrics[metric]["value"] for r in job_runs if metric in r.metrics and r.started_ns is not None]
        if not values:
            continue
        if metric.endswith("_ns"):
            unit, scale = duration_unit(max(values))
        elif metric.endswith("_bytes"):
            unit, scale = size_unit(max(values))
        else:
            unit, scale = "%", 0.01
        panels.append(f"{metric_title(metric)} ({unit})")
        for run in job_runs:
            row = run.metrics.get(metric)
            if row is None or run.started_ns is None:
                continue
            versus = f"{format_change(row['change_ratio'])} vs {run.baseline_run_id}" if run.baseline_run_id \
                else "first run"
            points.append({"metric": panels[-1], "v": row["value"] / scale,
                           "when": dt.datetime.fromtimestamp(run.started_ns / 1e9, tz=dt.UTC).isoformat(),
                           "desc": f"{run.run_id}: {format_value(metric, row['value'])} ({versus})",
                           "regressed": "yes" if row["is_regression"] else "no"})
    return _chart(charts.run_metric_trends(points, metrics=panels)) if points else ""


def _job_history(job_runs: Sequence[FleetRun]) -> str:
    rows = []
    for run in reversed(job_runs):  # newest first
        row: dict[str, Any] = {"html_run": _run_link(run.run_id), "started": _when(run.started_ns),
                               "html_baseline": _run_link(run.baseline_run_id) if run.baseline_run_id else "—",
                               "verdict": _verdict_text(run), "_regressed": bool(run.regressed)}
        row |= {f"html_{m}": _metric_cell(run, m) for m in TABLE_METRICS}
        rows.append(row)
    table = html_table(rows, [("html_run", "run"), ("started", "started (UTC)"), ("html_baseline", "baseline"),
                              *[(f"html_{m}", metric_title(m)) for m in TABLE_METRICS], ("verdict", "verdict")])
    note = ('<p class="note">Each value is the median over the run\'s healthy steps (run_metrics); under it, the '
            "change against the baseline run, red where run_regressions calls it a regression.</p>")
    return _trend_chart(job_runs) + note + table


def _single_runs(runs: Sequence[FleetRun]) -> str:
    rows = []
    for run in sorted(runs, key=lambda r: (-(r.started_ns or 0), r.run_id)):  # newest first
        row: dict[str, Any] = {"html_run": _run_link(run.run_id), "started": _when(run.started_ns)}
        row |= {f"html_{m}": _metric_cell(run, m, with_change=False)
                for m in (*TABLE_METRICS, "computation_kernel_ns")}
        rows.append(row)
    note = ('<p class="note">Each of these runs is the only run of its job (the runs\' parent folder), so there is no '
            "trend and no baseline; a job's next run, ingested into the same folder, is compared with it.</p>")
    return note + html_table(rows, [("html_run", "run"), ("started", "started (UTC)"),
                                    *[(f"html_{m}", metric_title(m))
                                      for m in (*TABLE_METRICS, "computation_kernel_ns")]])


def _unmeasured(rows: Sequence[dict[str, Any]]) -> str:
    """The lake's runs without run_metrics rows, each with why (fleet_unmeasured_runs), so none is left out unsaid."""
    for row in rows:
        row["html_run"] = _run_link(row["run_id"])
        row["started"] = _when(row["started_ns"])
    note = ('<p class="note">These runs are in the lake but have no headline metric (run_metrics), so they have no '
            "trend and no verdict: their reports still show what their traces hold.</p>")
    return note + html_table(rows, [("html_run", "run"), ("job", "job"), ("started", "started (UTC)"),
                                    ("why", "why no headline metric")])


def render_fleet_view(
    con: duckdb.DuckDBPyConnection,
    *,
    baselines: Mapping[str, str] | None = None,
    max_regression: float = 0.05,
) -> str:
    """Every run's headline metrics and verdict, read from ``run_regressions`` alone (so the page and
    ``tracelake check`` agree): the regressions first, the ranks that straggler_history finds to be the straggler
    in most of their job's recent runs, then each job with two or more runs over time (a trend panel per metric, its
    runs against their baselines), then the runs that are their job's only one, in one table.

    ``baselines`` pins a baseline run per job and ``max_regression`` is the threshold, both set as the view's DuckDB
    variables on ``con`` (a reading connection, :func:`pipelines.lake.read.open_lake`); a fleet view the lake's
    catalog lacks or holds with older SQL is read from its file (temporary views on ``con``)."""
    con.execute("set variable tracelake_max_regression = $ratio", {"ratio": float(max_regression)})
    con.execute("set variable tracelake_baselines = map($jobs, $runs)",
                {"jobs": list(baselines or {}), "runs": list((baselines or {}).values())})
    read_current_fleet_views(con, ALIAS)
    t = _Tables(con)
    runs = fleet_runs(t)
    jobs: dict[str, list[FleetRun]] = {}
    for run in runs:
        jobs.setdefault(run.job, []).append(run)
    history = {job: job_runs for job, job_runs in sorted(jobs.items()) if len(job_runs) > 1}
    singles = [job_runs[0] for job, job_runs in sorted(jobs.items()) if len(job_runs) == 1]
    anchors = {job: f"job-{i}" for i, job in enumerate(history)}
    regressed = sum(1 for r in runs if r.regressed)
    sections = [Section("Regressions", _regressions(runs, max_regression), "regressions")]
    stragglers = _repeat_stragglers(t)
    if stragglers:
        sections.append(Section("Ranks that are the straggler run after run", stragglers, "stragglers"))
    if len(history) > 1:
        sections.append(Section("Jobs with a history", _jobs_overview(history, anchors), "jobs"))
    sections += [Section(f"{job} ({plural(len(job_runs), 'run')})", _job_history(job_runs), anchors[job])
                 for job, job_runs in history.items()]
    if singles:
        sections.append(Section(f"Runs without a history ({plural(len(singles), 'job')} of one run)",
                                _single_runs(singles), "single-runs"))
    unmeasured = query_rows(con, "fleet_unmeasured_runs") if t.has("runs") and t.has("run_metrics") else []
    if unmeasured:
        sections.append(Section(f"Runs without headline metrics ({len(unmeasured)})", _unmeasured(unmeasured),
                                "unmeasured"))
    subtitle = (f"{plural(len(runs), 'run')} in {plural(len(jobs), 'job')} ({len(history)} with a history of runs, "
                f"{len(singles)} of a single run); {plural(regressed, 'run')} regressed against its baseline")
    if unmeasured:
        subtitle += f"; {plural(len(unmeasured), 'more run')} without headline metrics, listed last"
    if not runs and unmeasured:
        subtitle = f"{plural(len(unmeasured), 'run')} in the lake, none with headline metrics"
    elif not runs:
        sections = [Section("No runs", _missing("no run with headline metrics (run_metrics) in this lake: ingest runs "
                                                "(runs ingested before run_metrics existed need ingesting again)."),
                            "none")]
        subtitle = "no runs with headline metrics"
    return _page("tracelake fleet", escape(subtitle), sections)
