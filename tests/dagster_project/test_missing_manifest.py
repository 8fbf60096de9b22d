"""A run's hand-over between the step that stages its raw tables and the step that commits them is its JSON manifest
in the staging area; when it is gone (swept by maintenance, removed by a lifecycle rule), the commit step fails with a
line that says so, and the lake keeps the run's previous version: never a silent rebuild over the old raw tables."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest

import pipelines.staging.run
from dagster_project.assets.marts import marts
from dagster_project.assets.raw import raw_tables
from dagster_project.resources import IngestSettingsResource, LakeResource, TraceSourceResource
from pipelines.lake.read import open_lake
from pipelines.staging.manifest import ManifestMissing, read_run_manifest
from tests.support.servers import EXAMPLE_TRACES

pytestmark = pytest.mark.slow


def _materialize(source: Path, lake: Path, instance: dg.DagsterInstance) -> dg.ExecuteInJobResult:
    resources = {"source": TraceSourceResource(url=str(source)), "lake": LakeResource(url=str(lake)),
                 "ingest_settings": IngestSettingsResource()}
    return dg.materialize([raw_tables, marts], partition_key="job", instance=instance, resources=resources,
                          raise_on_error=False)


def test_a_missing_manifest_fails_the_commit_step_and_keeps_the_previous_version(tmp_path: Path, monkeypatch) -> None:
    source, lake = tmp_path / "source", tmp_path / "lake"
    shutil.copytree(EXAMPLE_TRACES / "simple_add", source / "job")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("trace_runs", ["job"])
        assert _materialize(source, lake, instance).success
        before = open_lake(str(lake)).execute("select count(*) from kernels").fetchone()

        write = pipelines.staging.run.write_run_manifest

        def swept(handle, staged):  # written, then swept before the commit step runs
            write(handle, staged)
            manifest = Path(handle.url, "_staging")
            for found in manifest.rglob("run.json"):
                found.unlink()

        monkeypatch.setattr(pipelines.staging.run, "write_run_manifest", swept)
        shutil.copy(EXAMPLE_TRACES / "rocm_mi250" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz", source / "job")
        result = _materialize(source, lake, instance)

    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    assert "manifest" in message and "is missing from the staging area" in message and "nothing was committed" in message
    assert open_lake(str(lake)).execute("select count(*) from kernels").fetchone() == before
    assert open_lake(str(lake)).execute("select count(*) from traces").fetchone() == (1,)


def test_reading_a_missing_manifest_says_where_it_was_expected(tmp_path: Path) -> None:
    from pipelines.lake.lake import Lake

    with pytest.raises(ManifestMissing, match=r"run 'job' \(version v1\): its manifest .*run\.json is missing"):
        read_run_manifest(Lake(str(tmp_path / "lake")), "job", "v1")
