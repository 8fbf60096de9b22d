"""Two traces of one run that claim one rank over overlapping windows: both are errors, both stay in the raw
tables, and the analysis tables count the rank once, from the trace with more events."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from pipelines.lake.lake import Lake
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from tests.support.servers import EXAMPLE_TRACES
from transforms.composition.ingest import ingest_run

SAMPLE = EXAMPLE_TRACES / "nccl_rank0_of_2" / "rank-0.json.gz"


def _ingest(source: Path, lake: Path) -> Lake:
    handle = Lake(str(lake))
    (run,) = discover_runs(str(source))
    ingest_run(run, handle)
    return handle


def test_a_rank_claimed_twice_is_counted_once(tmp_path: Path) -> None:
    single, double = tmp_path / "single" / "job", tmp_path / "double" / "job"
    single.mkdir(parents=True)
    double.mkdir(parents=True)
    shutil.copy(SAMPLE, single / "rank-0.json.gz")
    shutil.copy(SAMPLE, double / "a.json.gz")
    trace = json.loads(gzip.decompress(SAMPLE.read_bytes()))  # the same window, one kernel fewer
    trace["traceEvents"].remove(next(e for e in trace["traceEvents"] if e.get("cat") == "kernel"))
    (double / "b.json.gz").write_bytes(gzip.compress(json.dumps(trace).encode()))

    reference = open_lake(_ingest(single.parent, tmp_path / "reference").url)
    lake = open_lake(_ingest(double.parent, tmp_path / "lake").url)

    issues = lake.execute("select trace_id, severity, code, message from quality_issues "
                          "where code = 'duplicate_rank' order by trace_id").fetchall()
    assert [(t, s, c) for t, s, c, _ in issues] == [("a", "error", "duplicate_rank"), ("b", "error", "duplicate_rank")]
    assert "kept in the analysis tables" in issues[0][3]
    assert "excluded from the analysis tables (a is kept)" in issues[1][3]
    assert lake.execute("select trace_id, in_analysis from traces order by 1").fetchall() == [("a", True), ("b", False)]
    (kernels,) = reference.execute("select count(*) from kernels").fetchone()
    assert lake.execute("select count(*) from kernels").fetchone() == (2 * kernels - 1,)  # raw keeps both
    breakdown = "select step, total_ns, kernel_ns, communication_ns from step_breakdown order by step"
    assert lake.execute(breakdown).fetchall() == reference.execute(breakdown).fetchall() != []
    stats = "select sum(calls) from kernel_stats"
    assert lake.execute(stats).fetchone() == reference.execute(stats).fetchone() == (kernels,)
