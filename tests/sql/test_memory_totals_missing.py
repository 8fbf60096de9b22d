"""2021-format ``[memory]`` events (no ``Total Allocated``, ``Total Reserved`` or ``Addr``) keep what they allow: the
change of allocation since the trace began, and a quality issue that says the totals are missing.

The real case is the shared tb_plugin_resnet50 trace (kineto tb_plugin samples, BSD): 12,838 such events per window,
which the report called "no memory events". The hand-written run below has that pattern (phase ``i``, scope ``t``,
no ``cat``; args ``Device Type``, ``Device Id``, ``Bytes`` only) with numbers worked out by hand.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import fsspec
import pytest

from pipelines.identity import TraceFile
from pipelines.lake.lake import Lake
from pipelines.lake.read import open_lake
from pipelines.parse import ParseSettings, parse_trace
from pipelines.sources import discover_runs
from transforms.composition.ingest import ingest_run

T0_US = 1623142623460000  # legacy traces write absolute µs


def memory(ts: int, nbytes: int, device_type: int, device_id: int) -> dict:
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 25738, "tid": 25738, "ts": T0_US + ts,
            "args": {"Device Type": device_type, "Device Id": device_id, "Bytes": nbytes}}


# GPU 0: +512 at 10, +1024 at 20, -512 at 30, +256 at 40 → net 512, 1536, 1024, 1280: peak 1536 at 20 µs.
# CPU: +4 at 15, -4 at 25 → net 4, 0: peak 4 at 15 µs.
EVENTS = [
    {"ph": "X", "cat": "Operator", "name": "ProfilerStep#7", "pid": 25738, "tid": 25738, "ts": T0_US, "dur": 100},
    {"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 25738, "tid": 25738, "ts": T0_US + 5, "dur": 50},
    memory(10, 512, 1, 0), memory(15, 4, 0, -1), memory(20, 1024, 1, 0), memory(25, -4, 0, -1),
    memory(30, -512, 1, 0), memory(40, 256, 1, 0),
]


@pytest.fixture(scope="module")
def legacy_lake(tmp_path_factory: pytest.TempPathFactory):
    source = tmp_path_factory.mktemp("legacy_memory") / "resnet_like"
    source.mkdir()
    (source / "worker0.1623143089861.pt.trace.json").write_text(json.dumps({"traceEvents": EVENTS}, indent=1))
    lake_dir = tmp_path_factory.mktemp("legacy_memory_lake")
    lake = Lake(str(lake_dir))
    for run in discover_runs(str(source)):
        ingest_run(run, lake, select={"memory_timeline", "memory_peaks"})
    return open_lake(str(lake_dir))


def test_missing_totals_are_a_quality_issue(legacy_lake) -> None:
    rows = legacy_lake.sql(
        "select severity, count, message from quality_issues where code = 'memory_totals_missing'"
    ).fetchall()
    assert len(rows) == 1
    severity, count, message = rows[0]
    assert (severity, count) == ("warning", 6)
    assert "Total Allocated" in message and "net_allocated_bytes" in message


def test_the_curve_is_the_net_allocation_since_the_trace_began(legacy_lake) -> None:
    rows = legacy_lake.sql("""
        select device, (ts_ns // 1000) - $t0 as ts_us, allocated_bytes, reserved_bytes, delta_bytes,
               net_allocated_bytes
        from memory_timeline order by device, ts_ns
    """, params={"t0": T0_US}).fetchall()
    assert rows == [
        (-1, 15, None, None, 4, 4), (-1, 25, None, None, -4, 0),
        (0, 10, None, None, 512, 512), (0, 20, None, None, 1024, 1536), (0, 30, None, None, -512, 1024),
        (0, 40, None, None, 256, 1280),
    ]


def test_peaks_of_net_allocation(legacy_lake) -> None:
    rows = legacy_lake.sql("""
        select device, peak_allocated_bytes, peak_reserved_bytes, peak_net_allocated_bytes,
               (peak_ts_ns // 1000) - $t0 as peak_us, peak_step
        from memory_peaks order by device
    """, params={"t0": T0_US}).fetchall()
    assert rows == [(-1, None, None, 4, 15, 7), (0, None, None, 1536, 20, 7)]


def test_the_shared_2021_trace_reports_its_missing_totals(shared_traces: Path, tmp_path: Path) -> None:
    path = shared_traces / "tb_plugin_resnet50" / "worker0.1623143089861.pt.trace.json.gz"
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    without_totals = sum(
        1 for e in events
        if e.get("name") == "[memory]" and not {"Total Allocated", "Total Reserved"} <= set(e.get("args", {}))
    )
    trace = TraceFile(url=str(path), run_id="r", trace_id="t", size_bytes=path.stat().st_size)

    parsed = parse_trace(fsspec.filesystem("file"), str(path), trace, workdir=tmp_path, settings=ParseSettings())

    issues = {i.code: i for i in parsed.issues}
    assert without_totals == 12838
    assert (issues["memory_totals_missing"].severity, issues["memory_totals_missing"].count) == ("warning", 12838)
