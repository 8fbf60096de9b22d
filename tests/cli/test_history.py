"""``tracelake history RUN``: every committed version of the run that the lake keeps, the current one included when
retention expired its snapshot's record, and how many snapshots the lake expired."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from pipelines.lake.lake import Lake
from pipelines.sources import discover_runs
from tests.cli.conftest import tracelake
from tests.support.servers import EXAMPLE_TRACES
from transforms.composition.ingest import IngestSettings, ingest_run
from transforms.composition.steps import BuildSettings

FIRST, SECOND = "first", "second"


def _ingest(source: Path, lake: Path, run: str, retention: str | None = None) -> None:
    (found,) = [r for r in discover_runs(str(source)) if r.run_id == run]
    ingest_run(found, Lake(str(lake)), settings=IngestSettings(build=BuildSettings(threads=1), report=False,
                                                               retention=retention))


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("source")
    for run in (FIRST, SECOND):
        shutil.copytree(EXAMPLE_TRACES / "simple_add", root / run)
    return root


def _history(lake: Path, run: str) -> tuple[list[dict], str]:
    """The versions (``--format json``) and the table's text."""
    versions = tracelake("history", run, "--lake", str(lake), "--format", "json")
    table = tracelake("history", run, "--lake", str(lake))
    assert versions.code == table.code == 0, versions.stderr + table.stderr
    return json.loads(versions.stdout), table.stdout


def test_a_run_whose_snapshot_expired_still_has_its_current_version(tmp_path: Path, source: Path) -> None:
    lake = tmp_path / "lake"
    _ingest(source, lake, FIRST, retention="0 seconds")
    (kept,), _ = _history(lake, FIRST)  # its commit's own record: snapshot, time, fingerprint, source
    _ingest(source, lake, SECOND, retention="0 seconds")  # with no retention, this commit expires the first's snapshot
    (current,), out = _history(lake, FIRST)
    same = ("snapshot_id", "fingerprint", "source", "rebuilt")
    assert [current[k] for k in same] == [kept[k] for k in same], (kept, current)
    assert current["committed_at"][:10] == kept["committed_at"][:10]  # when its traces landed: the commit's is gone
    assert kept["version"] == "current" and current["version"] == "current; its snapshot record expired"
    expired = re.search(r"The lake keeps 1 snapshot of the (\d+) it committed: it expired (\d+)", out)
    assert expired and int(expired[2]) == int(expired[1]) - 1 > 0, out


def test_every_version_that_retention_keeps(tmp_path: Path, source: Path) -> None:
    lake = tmp_path / "lake"
    _ingest(source, lake, FIRST, retention="1 day")
    (source / FIRST / "alexnet_trace.json.gz").rename(source / FIRST / "rank-0.json.gz")  # a new file set
    try:
        _ingest(source, lake, FIRST, retention="1 day")
    finally:
        (source / FIRST / "rank-0.json.gz").rename(source / FIRST / "alexnet_trace.json.gz")
    rows, out = _history(lake, FIRST)
    assert len(rows) == 2 and rows[0]["snapshot_id"] < rows[1]["snapshot_id"], out
    assert rows[0]["fingerprint"] != rows[1]["fingerprint"]
    assert [r["version"] for r in rows] == ["readable as of its snapshot", "current"]


def test_an_unknown_run_is_one_line(tmp_path: Path, source: Path) -> None:
    lake = tmp_path / "lake"
    _ingest(source, lake, FIRST)
    done = tracelake("history", "firts", "--lake", str(lake))
    assert done.code == 1 and done.stderr.strip().endswith("did you mean 'first'?"), done.stderr
