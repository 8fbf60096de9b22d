"""Any legal folder or file name ingests: ids are total and distinct, collisions and skipped files are reported,
and a run whose traces are all bad still gets its (empty) analysis tables."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli.conftest import sql_rows, tracelake

pytestmark = pytest.mark.slow

GOOD = "edge_cases/tiny_base.json.gz"
OTHER = "edge_cases/tiny_test.json.gz"
LONG = "d" * 240


@pytest.fixture(scope="module")
def named_source(tmp_path_factory: pytest.TempPathFactory, shared_traces: Path) -> Path:
    root = tmp_path_factory.mktemp("names")
    for folder in ("runa", LONG, "coll a", "coll_a", "ü", "ö", "bad_only"):
        (root / folder).mkdir()
    shutil.copy(shared_traces / GOOD, root / "runa" / "config.json.gz")  # a Kineto trace named like a config file
    shutil.copy(shared_traces / OTHER, root / "runa" / "rank-3.json.gz")
    (root / "runa" / "linked.json.gz").symlink_to(shared_traces / "cuda_sync/event_sync.json.gz")
    (root / "runa" / "broken.json").symlink_to(root / "nowhere.json")
    (root / "runa" / "settings.json").write_text('{"lr": 0.1, "epochs": 3}')  # JSON that is no trace
    shutil.copy(shared_traces / GOOD, root / LONG / ("f" * 240 + ".json.gz"))
    for folder in ("coll a", "coll_a", "ü", "ö"):
        shutil.copy(shared_traces / GOOD, root / folder / "rank-0.json.gz")
    (root / "bad_only" / "rank-0.json").write_text('{"traceEvents": [42, "x", null]}')
    return root


@pytest.fixture(scope="module")
def ingested(named_source: Path, tmp_path_factory: pytest.TempPathFactory):
    lake = tmp_path_factory.mktemp("lake")
    return lake, tracelake("ingest", str(named_source), "--lake", str(lake))


def test_every_run_and_trace_lands_under_its_own_id(ingested) -> None:
    lake, done = ingested
    assert "ERROR run" not in done.stdout, done.stdout  # no step of any run failed
    traces = sql_rows(lake, "select run_id, trace_id, status from traces order by all")
    ids = {(t["run_id"], t["trace_id"]) for t in traces}
    assert {("runa", "config"), ("runa", "rank-3"), ("runa", "linked"), ("coll_a", "rank-0")} <= ids
    assert len({t["run_id"] for t in traces}) == 7  # coll a / coll_a and ü / ö stay apart
    assert all(len(run_id) <= 100 and len(trace_id) <= 100 for run_id, trace_id in ids)
    assert {t["status"] for t in traces if t["run_id"] != "bad_only" and t["trace_id"] != "settings"} == {"ok"}
    kernels = sql_rows(lake, "select run_id, count(*) as n from kernels group by all")
    assert len(kernels) == 6 and len({k["n"] for k in kernels if k["run_id"] != "runa"}) == 1


def test_json_that_is_no_trace_is_one_line(ingested) -> None:
    _, done = ingested
    lines = [line for line in done.stdout.splitlines() if "settings.json" in line]
    assert len(lines) == 1 and lines[0].endswith("[not_a_kineto_trace]"), done.stdout


def test_a_link_to_nothing_is_reported(ingested) -> None:
    _, done = ingested
    assert "skipped" in done.stderr and "broken.json" in done.stderr, done.stderr


def test_a_run_of_only_bad_events_gets_empty_analysis_tables(ingested) -> None:
    lake, done = ingested
    lines = [line for line in done.stdout.splitlines() if "bad_only/rank-0.json" in line and line.startswith("ERROR")]
    assert len(lines) == 1 and lines[0].endswith("[not_an_object]"), done.stdout
    issue = sql_rows(lake, "select count from quality_issues where run_id = 'bad_only' and code = 'not_an_object'")
    assert issue == [{"count": 3}]
    assert sql_rows(lake, "select count(*) as n from kernel_stats where run_id = 'bad_only'") == [{"n": 0}]
    assert sql_rows(lake, "select trace_count from runs where run_id = 'bad_only'") == [{"trace_count": 1}]


def test_runs_named_like_dates_stay_text(tmp_path: Path, shared_traces: Path) -> None:
    for day, trace in (("2024-01-01", GOOD), ("2024-01-02", OTHER)):
        (tmp_path / "src" / day).mkdir(parents=True)
        shutil.copy(shared_traces / trace, tmp_path / "src" / day / "rank-0.json.gz")
    lake = tmp_path / "lake"
    assert tracelake("ingest", str(tmp_path / "src"), "--lake", str(lake)).code == 0
    rows = sql_rows(lake, "select run_id, typeof(run_id) as type from runs where run_id like '2024%' order by run_id")
    assert rows == [{"run_id": "2024-01-01", "type": "VARCHAR"}, {"run_id": "2024-01-02", "type": "VARCHAR"}]
    done = tracelake("compare", "2024-01-01", "2024-01-02", "--lake", str(lake), "--format", "json")
    assert done.code == 0, done.stderr
    assert "ProfilerStep" in done.stdout


def test_two_folders_that_would_be_one_run_are_an_error_naming_both(tmp_path: Path, shared_traces: Path) -> None:
    for folder in ("a/b", "a.b"):
        (tmp_path / "src" / folder).mkdir(parents=True)
        shutil.copy(shared_traces / GOOD, tmp_path / "src" / folder / "rank-0.json.gz")
    done = tracelake("ingest", str(tmp_path / "src"), "--lake", str(tmp_path / "lake"))
    assert done.code != 0
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "'a/b'" in line and "'a.b'" in line]
    assert len(lines) == 1, done.stdout + done.stderr
