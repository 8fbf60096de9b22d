"""The fleet view (``LAKE/reports/index.html``): a job's runs over time, each against its baseline, regressions
flagged; checked on a lake of three runs of one job, the last one slowed down, and in a real headless Chromium."""

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
from transforms.report.pages import render_fleet_view

pytestmark = pytest.mark.slow

TEMPLATE = EXAMPLE_TRACES / "rocm_mi250" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
HOUR_NS = 3600 * 10**9


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
    """Job ``toy``: runs 1 and 2 alike, run 3 twice as slow in every step."""
    root = tmp_path_factory.mktemp("fleet")
    for n, stretch in ((1, 1.0), (2, 1.0), (3, 2.0)):
        _write_run(root / "traces" / "toy" / f"run{n}", hours_later=n, stretch=stretch)
    assert ingest(str(root / "traces"), str(root / "lake")) == 0
    return root / "lake"


def _rows(html: str) -> dict[str, str]:
    """Each run's table row in the page, by run_id."""
    return {m.group(2): m.group(0) for m in re.finditer(r'<tr( class="regressed")?><td[^>]*><a href="[^"]+">'
                                                        r"([^<]+)</a>.*?</tr>", html)}


def test_fleet_view_flags_the_slowed_run_against_the_previous_one(fleet_lake):
    con = open_lake(str(fleet_lake))
    step = dict(con.execute("select run_id, avg(total_ns) from step_breakdown group by run_id").fetchall())
    assert step["toy.run3"] > 1.5 * step["toy.run2"]  # the stretched trace is slower, as built

    html = (fleet_lake / "reports" / "index.html").read_text()  # written by ingest
    rows = _rows(html)
    assert set(rows) == {"toy.run1", "toy.run2", "toy.run3"}
    assert 'class="regressed"' in rows["toy.run3"] and "step time" in rows["toy.run3"].split("<td")[-1]
    assert 'class="regressed"' not in rows["toy.run2"]
    assert ">toy.run2<" in rows["toy.run3"]  # its baseline: the job's previous run
    change = 100 * (step["toy.run3"] - step["toy.run2"]) / step["toy.run2"]
    assert f">+{change:.3g} %<" in rows["toy.run3"]

    chosen = _rows(render_fleet_view(con, baselines={"toy": "toy.run1"}))
    assert ">toy.run1<" in chosen["toy.run2"] and ">toy.run1<" in chosen["toy.run3"]


def test_fleet_view_renders_in_chromium(fleet_lake, tmp_path):
    with chromium() as browser, browser.page() as page:
        page.goto((fleet_lake / "reports" / "index.html").as_uri(), width=1280)
        layout = page.evaluate(LAYOUT)
        link = page.evaluate("document.querySelector('a[href=\"toy.run3.html\"]') !== null")
        png = page.screenshot(tmp_path / "fleet.png")
    assert layout["headings"] == ["toy (3 runs)"]
    assert "3 runs in 1 job; 1 run with a regression" in layout["text"]
    for title in ("step time", "GPU utilization", "exposed communication", "peak memory", "baseline"):
        assert title in layout["text"]
    assert link
    assert layout["scrollWidth"] <= layout["clientWidth"] and layout["overflowing"] == []
    assert len(layout["charts"]) == 1 and layout["charts"][0]["width"] >= 500 and layout["charts"][0]["height"] >= 150
    pixels = decode_png(png)
    assert pixels[..., :3].astype(float).mean(axis=2).std() > 10
    assert len(np.unique(pixels[..., :3].reshape(-1, 3), axis=0)) > 50
