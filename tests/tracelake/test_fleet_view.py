"""The fleet view (``LAKE/reports/index.html``) on a folder of 24 runs: two jobs with a history (``toy``: four runs,
the last one three times as slow; ``nightly``: two alike) and 18 unrelated runs, each its own job, as a folder of
traces collected from many places holds them. Its verdicts are run_regressions'; checked in a real headless Chromium.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.support.browser import LAYOUT, chromium
from tests.support.png import decode_png
from tests.support.servers import EXAMPLE_TRACES
from tracelake import open_lake
from tracelake.ingest import ingest
from transforms.report.pages import metric_title, render_fleet_view

pytestmark = pytest.mark.slow

TEMPLATE = EXAMPLE_TRACES / "rocm_mi250" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
HOUR_NS = 3600 * 10**9
HISTORY = {"toy": (1.0, 1.0, 1.02, 3.0), "nightly": (1.0, 1.0)}  # job -> each run's stretch, in order
# Unrelated runs, named as people name them: long, with dates and separators, one with a 40-character part.
SINGLES = [f"{model}-finetune-2024-05-{day:02d}T01-35-22-nodes{nodes}" for model, day, nodes in (
    ("llama3-70b", 1, 16), ("mixtral-8x7b", 2, 8), ("resnet50", 3, 1), ("vit-huge", 4, 2), ("bert-large", 5, 4),
    ("t5-xxl", 6, 32), ("gpt2-medium", 7, 1), ("sdxl-unet", 8, 8), ("whisper", 9, 2), ("dlrm", 10, 16),
    ("mamba-2.8b", 11, 4), ("phi3-mini", 12, 1), ("yolo-v8", 13, 1), ("efficientnet", 14, 2), ("gemma-7b", 15, 8),
    ("qwen2-7b", 16, 8), ("deberta-v3", 17, 1))] + ["averyveryverylongexperimentnamewithoutbreaks"]


def _write_run(folder: Path, *, hours_later: int, stretch: float) -> None:
    """The template trace, started ``hours_later`` and with every event's time from the start scaled by ``stretch``."""
    trace = json.loads(gzip.decompress(TEMPLATE.read_bytes()))
    trace["baseTimeNanoseconds"] += hours_later * HOUR_NS
    events = [e for e in trace["traceEvents"] if "ts" in e]
    start = min(float(e["ts"]) for e in events)
    for event in events:
        event["ts"] = start + (float(event["ts"]) - start) * stretch
        if "dur" in event:
            event["dur"] = float(event["dur"]) * stretch
    folder.mkdir(parents=True)
    (folder / "rank-0.json.gz").write_bytes(gzip.compress(json.dumps(trace).encode()))


@pytest.fixture(scope="module")
def fleet_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet")
    hour = 0
    for job, stretches in HISTORY.items():
        for n, stretch in enumerate(stretches, 1):
            hour += 1
            _write_run(root / "traces" / job / f"run{n}", hours_later=hour, stretch=stretch)
    for n, name in enumerate(SINGLES):
        _write_run(root / "traces" / name, hours_later=100 + n, stretch=1 + n / 20)
    assert ingest(str(root / "traces"), str(root / "lake"), jobs=2, record=False) == 0
    return root / "lake"


def _table_verdicts(lake: Path) -> dict[str, list[str]]:
    """Each run's regressed metrics, as run_regressions says."""
    con = open_lake(str(lake))
    rows = con.execute("select run_id, list(metric order by metric) filter (where is_regression) "
                       "from run_regressions group by run_id").fetchall()
    return {run: metrics or [] for run, metrics in rows}


def test_the_tables_flag_the_slowed_run_only(fleet_lake):
    verdicts = _table_verdicts(fleet_lake)
    assert len(verdicts) == 24
    assert "step_ns" in verdicts["toy.run4"]  # three times as slow, as built
    assert [run for run, metrics in verdicts.items() if metrics] == ["toy.run4"]


# In the page: each history row's run and verdict, the regressions table's (run, metric) pairs, and per chart its
# panels' axes; and, for every header and run id, whether its cell is at least as wide as its longest word (a
# narrower cell would break the word).
PAGE = """(() => {
  const rows = [...document.querySelectorAll('section[id^="job-"] tbody tr')].map((tr) =>
    [tr.cells[0].innerText, tr.cells[tr.cells.length - 1].innerText, tr.className]);
  const regressions = [...document.querySelectorAll('#regressions tbody tr')].map((tr) =>
    [tr.cells[0].innerText, tr.cells[3].innerText]);
  const axes = [...document.querySelectorAll('.chart svg')].map((svg) =>
    [svg.querySelectorAll('[aria-label^="X-axis"]').length, svg.querySelectorAll('[aria-label^="Y-axis"]').length]);
  const probe = document.body.appendChild(document.createElement('span'));
  probe.style.cssText = 'position: absolute; visibility: hidden; white-space: nowrap';
  const broken = [...document.querySelectorAll('th, a.id')].filter((el) => {
    const style = getComputedStyle(el);
    probe.style.font = style.font;
    const words = el.textContent.split(el.tagName === 'A' ? /(?<=[._-])/ : /\\s+/);
    const widest = Math.max(...words.map((w) => { probe.textContent = w; return probe.getBoundingClientRect().width; }));
    const cell = el.tagName === 'A' ? el.parentElement : el;
    const cellStyle = getComputedStyle(cell);
    const inner = cell.clientWidth - parseFloat(cellStyle.paddingLeft) - parseFloat(cellStyle.paddingRight);
    return widest > inner + 0.5 && el.textContent.length < 30;
  }).map((el) => el.textContent);
  probe.remove();
  return {rows, regressions, axes, broken};
})()"""


def test_fleet_view_renders_a_folder_of_runs_in_chromium(fleet_lake, tmp_path):
    with chromium() as browser, browser.page() as page:
        page.goto((fleet_lake / "reports" / "index.html").as_uri(), width=1280)
        layout = page.evaluate(LAYOUT)
        found = page.evaluate(PAGE)
        png = page.screenshot(tmp_path / "fleet.png")
    assert layout["headings"] == ["Regressions", "Jobs with a history", "nightly (2 runs)", "toy (4 runs)",
                                  "Runs without a history (18 jobs of one run)"]
    assert "24 runs in 20 jobs (2 with a history of runs, 18 of a single run); 1 run regressed" in layout["text"]

    # The verdicts are the tables': each run of a job with a history, and the regressions table.
    verdicts = _table_verdicts(fleet_lake)
    shown = {run: (verdict, cls) for run, verdict, cls in found["rows"]}
    assert set(shown) == {f"{job}.run{n}" for job, runs in HISTORY.items() for n in range(1, len(runs) + 1)}
    for run, (verdict, cls) in shown.items():
        assert (cls == "regressed") == bool(verdicts[run]), run
        if run.endswith("run1"):
            assert verdict == "first run"
        elif verdicts[run]:
            assert verdict.startswith("regressed: ")
            assert set(verdict.removeprefix("regressed: ").split(", ")) == {metric_title(m) for m in verdicts[run]}
        else:
            assert verdict == "ok", run
    assert sorted(map(tuple, found["regressions"])) == sorted(
        (run, metric_title(m)) for run, metrics in verdicts.items() for m in metrics)

    # Two trend charts (one per job with a history), no chart of a single dot; each panel has its own time axis,
    # so no axis stands under an empty grid cell.
    assert len(layout["charts"]) == 2 and all(c["width"] >= 500 and c["height"] >= 150 for c in layout["charts"])
    assert all(x == y for x, y in found["axes"]), found["axes"]
    # Nothing runs off the page; no header or run id breaks inside a word; no number in e-notation.
    assert layout["scrollWidth"] <= layout["clientWidth"] and layout["overflowing"] == []
    assert found["broken"] == []
    assert not re.search(r"\d(\.\d+)?e[-+]?\d", layout["text"])
    for name in SINGLES:
        assert name in layout["text"].replace("\n", "")

    pixels = decode_png(png)
    assert pixels[..., :3].astype(float).mean(axis=2).std() > 10
    assert len(np.unique(pixels[..., :3].reshape(-1, 3), axis=0)) > 50


def test_a_pinned_baseline_is_compared_with_every_run_of_its_job(fleet_lake):
    html = render_fleet_view(open_lake(str(fleet_lake)), baselines={"toy": "toy.run1"})
    section = html[html.index('id="job-1"'):html.index('id="single-runs"')]
    baselines = re.findall(r'<tr[^>]*><td><a class="id" href="(toy\.run\d)\.html">.*?</td><td[^>]*>[^<]*</td>'
                           r'<td><a class="id" href="([^"]+)\.html">', section)
    assert sorted(baselines) == [("toy.run2", "toy.run1"), ("toy.run3", "toy.run1"), ("toy.run4", "toy.run1")]
