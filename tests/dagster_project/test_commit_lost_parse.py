"""The run's staging step never commits part of a run: a listed trace without a parse result (its mapped step lost
with a worker before it logged its start, which Dagster's re-execution from failure does not run again) is parsed
by that step itself."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dagster_project.assets.raw import complete_staging
from dagster_project.resources import IngestSettingsResource, LakeResource
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from pipelines.staging.area import new_version
from tests.support.servers import EXAMPLE_TRACES
from tracelake.ingest import ingest
from transforms.composition.steps import build_tables, commit_run, stage_run, stage_trace

pytestmark = pytest.mark.slow

TRACES = {"rank-0": "simple_add/alexnet_trace.json.gz", "rank-1": "rocm_mi250/mi250_minitoy_train_ROCm6_2_kineto.json.gz"}


def _rows(lake: Path) -> dict[str, int]:
    con = open_lake(str(lake))
    return {t: con.sql(f"select count(*) from {t}").fetchone()[0] for t in ("traces", "kernels", "cpu_ops")}


def test_commit_parses_a_listed_trace_that_has_no_parse_result(tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / "job").mkdir(parents=True)
    for trace_id, example in TRACES.items():
        shutil.copy(EXAMPLE_TRACES / example, source / "job" / f"{trace_id}.json.gz")
    lake = LakeResource(url=str(tmp_path / "lake"))
    settings = IngestSettingsResource()
    (run,) = discover_runs(str(source))
    version = new_version()
    handle = lake.lake()
    stage_trace(run.traces[0], handle, version, settings=settings.parse_settings())  # rank-1's step never ran

    staged = complete_staging(run, handle, version, lambda trace: stage_trace(trace, handle, version))
    committed = stage_run(run, handle, version, staged)
    commit_run(handle, committed, build_tables(handle, committed))

    assert sorted(s.parsed.trace.trace_id for s in staged) == ["rank-0", "rank-1"]
    assert ingest(str(source), str(tmp_path / "reference"), record=False) == 0
    assert _rows(tmp_path / "lake") == _rows(tmp_path / "reference")
