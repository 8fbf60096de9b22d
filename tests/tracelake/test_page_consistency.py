"""Every figure a page shows is its mart's (or page query's) column, and no name shows two values.

Renders every page of a lake the way ingest does (the demo's lake: CPU, gloo DDP, tensor x data parallel, a
pipeline, and the shipped GPU traces; and the shared real traces), reads back each figure's marker (``data-metric``
``table.column``, ``data-row`` its grain values, ``data-value``, ``data-unit``, ``data-title``) and compares it with
the table it names, read on its own."""

from __future__ import annotations

import json
import math
import re
import shutil
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from tracelake import open_lake
from tracelake.demo import run_demo
from tracelake.ingest import ingest
from transforms.models import discover_queries
from transforms.report.pages import MEMORY_POINTS, TOP
from transforms.report.queries import query_rows
from transforms.units import format_value

SHARED_TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
_FIGURE = re.compile(r"<(td|span)\b([^>]*\bdata-metric=\"[^\"]*\"[^>]*)>(.*?)</\1>", re.S)
SEVERITIES = ("critical", "warning", "info")
COUNTS = frozenset({"steps", "calls", "ranks", "collectives", "launches"})
_ATTRIBUTE = re.compile(r'\b(data-[a-z]+)="([^"]*)"')


@pytest.fixture(scope="module")
def demo_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    assert run_demo(lake_url=str(root / "lake"), traces_dir=str(root / "traces")) == 0
    return root / "lake"


@pytest.fixture(scope="module")
def shared_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is not beside the repository")
    root = tmp_path_factory.mktemp("shared")
    shutil.copytree(SHARED_TRACES, root / "traces", ignore=shutil.ignore_patterns("*.md"))
    ingest(str(root / "traces"), str(root / "lake"), record=False)
    return root / "lake"


def figures(html: str) -> list[dict[str, Any]]:
    """Each marked figure of a page: its attributes and the text shown."""
    found = []
    for _tag, attributes, text in _FIGURE.findall(html):
        fields = {name.removeprefix("data-"): unescape(value) for name, value in _ATTRIBUTE.findall(attributes)}
        fields["row"] = json.loads(fields["row"])
        fields["text"] = unescape(re.sub(r"<[^>]+>", "", text)).strip()
        found.append(fields)
    return found


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b)
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def _shown_value(text: str) -> Any:
    return None if text == "" else (text == "true" if text in ("true", "false") else float(text))


class Tables:
    """The rows each figure names, read once per (table, run)."""

    def __init__(self, lake: Path) -> None:
        self.con = open_lake(str(lake))
        self.queries = discover_queries()
        self.cache: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def rows(self, table: str, run_id: str) -> list[dict[str, Any]]:
        if (table, run_id) not in self.cache:
            if table in self.queries:
                rows = query_rows(self.con, table, run_id=run_id, top=TOP, points=MEMORY_POINTS)
            else:
                cursor = self.con.execute(f"select * from {table} where run_id = $run_id", {"run_id": run_id})
                names = [d[0] for d in cursor.description]
                rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
            self.cache[table, run_id] = rows
        return self.cache[table, run_id]

    def value(self, figure: dict[str, Any]) -> Any:
        table, column = figure["metric"].split(".", 1)
        key = figure["row"]
        matches = [r for r in self.rows(table, key["run_id"])
                   if all(str(r.get(k)) == str(v) for k, v in key.items())]
        assert len(matches) == 1, f"{figure['metric']} {key}: {len(matches)} rows in {table}"
        return matches[0][column]


def check_pages(lake: Path) -> list[dict[str, Any]]:
    """Every figure of every page of ``lake`` against its table; returns them, each with its page."""
    tables = Tables(lake)
    pages = sorted((lake / "reports").glob("*.html"))
    runs = {r for (r,) in tables.con.execute("select run_id from runs").fetchall()}
    assert {p.stem for p in pages} == runs | {"index"}
    shown: list[dict[str, Any]] = []
    for page in pages:
        page_figures = figures(page.read_text())
        assert page_figures, f"{page.name} marks no figure"
        for figure in page_figures:
            value = tables.value(figure)
            where = f"{page.name}: {figure['title']} = {figure['text']} ({figure['metric']} {figure['row']})"
            assert _same(value, _shown_value(figure["value"])), f"{where}: the table holds {value}"
            assert figure["text"] == format_value(figure["unit"], value), f"{where}: the table holds {value}"
            shown.append({**figure, "page": page.name})
    by_figure: dict[tuple[str, str], set[str]] = {}
    by_title: dict[tuple[str, str], set[str]] = {}
    for f in shown:
        by_figure.setdefault((f["metric"], json.dumps(f["row"], sort_keys=True)), set()).add(f["text"])
        definition = f["metric"] + (f"[{f['row']['metric']}]" if "metric" in f["row"] else "")
        by_title.setdefault((f["row"]["run_id"], f["title"]), set()).add(definition)
    assert {k: v for k, v in by_figure.items() if len(v) > 1} == {}, "a figure shown with two values"
    # A name on a run's pages means one definition: a column of one table. Counts (steps, calls, ranks ...) are
    # columns of several page queries, each counting what its table counts, under the same plain name.
    clashes = {k: v for k, v in by_title.items()
               if len({d for d in v if d.split(".", 1)[1] not in COUNTS}) > 1}
    assert clashes == {}, f"one name, two definitions: {clashes}"
    return shown


def test_every_figure_of_the_demo_lake_is_its_tables(demo_lake):
    shown = check_pages(demo_lake)
    titles = {(f["page"], f["metric"], f["row"].get("metric")): f["title"] for f in shown}
    # the fleet view and the report show run_metrics' GPU utilization under one name, gpu_metrics' under another
    fleet = titles["index.html", "run_metrics.value", "step_gpu_utilization_ratio"]
    assert titles["nccl_rank0_of_2.html", "run_metrics.value", "step_gpu_utilization_ratio"] == fleet
    assert titles["nccl_rank0_of_2.html", "gpu_metrics.gpu_utilization_ratio", None] != fleet
    # every run of the lake is on the fleet view, with headline metrics or with why it has none
    index = (demo_lake / "reports" / "index.html").read_text()
    con = open_lake(str(demo_lake))
    for (run_id,) in con.execute("select run_id from runs").fetchall():
        assert f'href="{run_id}.html"' in index, run_id


@pytest.mark.slow
def test_every_figure_of_the_shared_traces_is_its_tables(shared_lake):
    check_pages(shared_lake)


# What the browser tests read of a page: the findings in order with their severity's colour, the kernel chart's bars
# with their fill, and the sections.
_PAGE_FACTS = """(() => ({
  findings: [...document.querySelectorAll('li.finding')].map((li) => ({
    rule: li.dataset.rule, cls: li.className, border: getComputedStyle(li).borderLeftColor,
    stake: li.querySelector('.stake') ? Number(li.querySelector('.stake').dataset.value) : null})),
  sections: [...document.querySelectorAll('section')].map((s) => s.id),
  kernelBars: [...document.querySelectorAll('#kernels svg [role="graphics-symbol"]')]
    .filter((el) => (el.getAttribute('aria-label') || '').startsWith('#')).map((el) => ({label: el.getAttribute('aria-label'),
                                                                  fill: el.getAttribute('fill')})),
  kernelTitles: [...document.querySelectorAll('#kernels span.kernel')].map((s) => [s.textContent, s.title]),
}))()"""


@pytest.mark.slow
def test_pages_in_chromium_rank_findings_colour_kernels_and_show_the_new_sections(demo_lake, tmp_path):
    from tests.support.browser import LAYOUT, chromium
    from transforms.report.charts import CATEGORY_COLORS

    con = open_lake(str(demo_lake))
    with chromium() as browser:
        facts, layouts = {}, {}
        for run_id in ("gloo_tp_dp", "gloo_ddp", "nccl_rank0_of_2", "cpu_mlp", "index"):
            with browser.page() as page:
                page.goto((demo_lake / "reports" / f"{run_id}.html").as_uri(), width=1280)
                facts[run_id], layouts[run_id] = page.evaluate(_PAGE_FACTS), page.evaluate(LAYOUT)
                page.screenshot(tmp_path / f"{run_id}.png")
    for run_id in ("gloo_tp_dp", "gloo_ddp"):
        findings = facts[run_id]["findings"]
        rules = [f["rule"] for f in findings]
        assert len(rules) == len(set(rules)), "one item per finding, not one per rank"
        order = [next(i for i, sev in enumerate(SEVERITIES) if f"sev-{sev}" in f["cls"]) for f in findings]
        assert order == sorted(order), "critical first, then warnings, then information"
        critical = [f for f in findings if "sev-critical" in f["cls"]]
        assert {f["border"] for f in critical} <= {"rgb(179, 38, 30)"}  # critical in red, warnings in orange
        warnings = [f for f in findings if "sev-warning" in f["cls"]]
        assert warnings and {f["border"] for f in warnings} == {"rgb(232, 163, 61)"}
        stakes = [f["stake"] for f in warnings if f["stake"] is not None]
        assert stakes == sorted(stakes, reverse=True), "warnings by the time at stake"
        ranked = con.execute("select count(distinct rule) from recommendations where run_id = $r", {"r": run_id})
        assert len(findings) == ranked.fetchone()[0]
        assert "sync" in facts[run_id]["sections"]  # communication: waiting vs moving data
    # gloo_ddp's ranks do uneven work by design: its straggler is the critical finding, and it leads
    assert facts["gloo_ddp"]["findings"][0]["rule"] == "straggler"
    assert "sev-critical" in facts["gloo_ddp"]["findings"][0]["cls"]
    nccl = facts["nccl_rank0_of_2"]
    assert {"idle", "launches", "kernels", "headline"} <= set(nccl["sections"])
    communication = [b for b in nccl["kernelBars"] if "ncclKernel" in b["label"]]
    assert communication and {b["fill"] for b in communication} == {CATEGORY_COLORS["communication"]}
    assert {b["fill"] for b in nccl["kernelBars"] if "ncclKernel" not in b["label"]} == {CATEGORY_COLORS["kernel"]}
    for short, full in nccl["kernelTitles"]:
        assert len(short) <= 64 and "(" not in short and (short == full or len(full) > len(short))
    assert not {"gpu", "kernels", "idle", "launches"} & set(facts["cpu_mlp"]["sections"]), "a CPU report"
    assert "A CPU report" in layouts["cpu_mlp"]["text"]
    assert "GPU utilization (median healthy step)" in layouts["index"]["text"]
    for layout in layouts.values():
        assert layout["scrollWidth"] <= layout["clientWidth"] and layout["overflowing"] == [], layout["overflowing"]


def test_the_fleet_view_lists_runs_without_headline_metrics(tmp_path):
    """A CPU trace with no ProfilerStep and no memory events has no run_metrics row: the fleet view lists it with
    why, beside a run that has headline metrics, and says so at the top."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from tests.support.servers import EXAMPLE_TRACES

    traces = tmp_path / "traces"
    shutil.copytree(EXAMPLE_TRACES / "rocm_mi250", traces / "rocm_mi250")
    (traces / "no_steps").mkdir()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.randn(64, 64) @ torch.randn(64, 64)
    prof.export_chrome_trace(str(traces / "no_steps" / "matmul.json"))
    assert ingest(str(traces), str(tmp_path / "lake"), record=False) == 0
    con = open_lake(str(tmp_path / "lake"))
    assert con.execute("select count(*) from run_metrics where run_id = 'no_steps'").fetchone()[0] == 0
    index = (tmp_path / "lake" / "reports" / "index.html").read_text()
    unmeasured = index.split('<section id="unmeasured">')[1].split("</section>")[0]
    assert 'href="no_steps.html"' in unmeasured and "no ProfilerStep markers" in unmeasured
    assert 'href="rocm_mi250.html"' not in unmeasured and 'href="rocm_mi250.html"' in index
    assert "1 more run without headline metrics, listed last" in index
    check_pages(tmp_path / "lake")
