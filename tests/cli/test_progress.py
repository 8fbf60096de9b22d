"""What `tracelake ingest` prints while it works: a line per trace parsed, and a line before and after each run's
analysis tables, whose models take tens of seconds on GB-sized traces."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from dagster_project.assets.marts import MARTS
from tests.cli.conftest import tracelake


def test_ingest_reports_each_runs_traces_and_analysis_tables(tmp_path: Path, shared_traces: Path) -> None:
    source = tmp_path / "source"
    for run_id, trace in (("alexnet", "simple_add/alexnet_trace.json.gz"), ("nccl", "nccl_rank0_of_2/rank-0.json.gz")):
        (source / run_id).mkdir(parents=True)
        shutil.copy(shared_traces / trace, source / run_id / "rank-0.json.gz")

    done = tracelake("ingest", str(source), "--lake", str(tmp_path / "lake"))

    assert done.code == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for index, run_id in enumerate(("alexnet", "nccl"), 1):
        at = lines.index(f"[{index}/2] run {run_id}: 1 trace")
        own = [line for line in lines[at + 1:] if line.startswith(f"  {run_id}")][:4]  # problems' lines between
        parsed, building, built, committed = own
        assert re.fullmatch(rf"  {run_id} rank \d+ rank-0: [\d,]+ events in \d+\.\d s", parsed), done.stdout
        assert building == f"  {run_id}: building {len(MARTS)} analysis tables"
        assert re.fullmatch(rf"  {run_id}: {len(MARTS)} analysis tables in \d+\.\d s", built), done.stdout
        assert re.fullmatch(rf"  {run_id}: committed as snapshot \d+", committed), done.stdout
