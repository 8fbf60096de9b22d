"""The marts step's DuckDB buffer comes from IngestSettingsResource.marts_memory_limit."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from dagster_project.assets.marts import marts
from dagster_project.assets.raw import raw_tables
from dagster_project.resources import IngestSettingsResource, LakeResource, TraceSourceResource
from tests.support.servers import EXAMPLE_TRACES


def test_marts_step_builds_within_the_configured_buffer(tmp_path: Path) -> None:
    resources = {
        "source": TraceSourceResource(url=str(EXAMPLE_TRACES)),
        "lake": LakeResource(url=str(tmp_path / "lake")),
        # far below what any model needs: the marts step must fail, and say why
        "ingest_settings": IngestSettingsResource(marts_memory_limit="1MB"),
    }
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("trace_runs", ["rocm_mi250"])
        result = dg.materialize([raw_tables, marts], partition_key="rocm_mi250", instance=instance,
                                resources=resources, raise_on_error=False)
    failures = [e for e in result.all_events if e.is_step_failure]
    assert [e.step_key for e in failures] == ["marts"]  # the raw tables landed; only the models ran out
    assert "Out of Memory Error" in failures[0].step_failure_data.error.to_string()  # the cause, with its model
