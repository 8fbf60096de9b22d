"""The sensor's and the schedule's requests over a loopback S3 source, evaluated in-process."""

from __future__ import annotations

import dagster as dg

from dagster_project.assets.marts import marts
from dagster_project.assets.raw import raw_tables
from dagster_project.resources import IngestSettingsResource, LakeResource, TraceSourceResource
from dagster_project.run_requests import FILES_TAG
from dagster_project.schedules import trace_runs_schedule
from dagster_project.sensors import trace_runs_sensor
from tests.support.servers import EXAMPLE_TRACES

TRACE = (EXAMPLE_TRACES / "rocm_mi250" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz").read_bytes()


def test_sensor_requests_each_file_set_once(bucket):
    source = TraceSourceResource(url=bucket.url("fleet"))
    bucket.put("fleet/a/rank-0.json.gz", TRACE)
    with dg.instance_for_test() as instance:
        first = trace_runs_sensor(dg.build_sensor_context(instance=instance, resources={"source": source}))
        assert [r.partition_key for r in first.run_requests] == ["a"]
        assert first.run_requests[0].run_config == {"ops": {"raw_tables": {"config": {"run_url": bucket.url("fleet/a")}}}}
        assert [req.partition_keys for req in first.dynamic_partitions_requests] == [["a"]]

        again = trace_runs_sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor, resources={"source": source}))
        assert again.run_requests == [] and again.dynamic_partitions_requests == []

        bucket.put("fleet/a/rank-1.json.gz", TRACE)
        late = trace_runs_sensor(dg.build_sensor_context(instance=instance, cursor=again.cursor, resources={"source": source}))
        assert [r.partition_key for r in late.run_requests] == ["a"]
        assert late.run_requests[0].run_key != first.run_requests[0].run_key
        assert late.dynamic_partitions_requests == []  # the partition exists already


def _evaluate_schedule(instance: dg.DagsterInstance, source: TraceSourceResource) -> list[dg.RunRequest]:
    # The context opens its own instance (which sets a process-wide context variable): close it.
    with dg.build_schedule_context(instance=instance, resources={"source": source}) as context:
        return trace_runs_schedule(context)


def test_schedule_skips_file_sets_that_a_run_already_ingested(bucket, tmp_path):
    source = TraceSourceResource(url=bucket.url("fleet"))
    bucket.put("fleet/a/rank-0.json.gz", TRACE)
    bucket.put("fleet/b/rank-0.json.gz", TRACE)
    with dg.instance_for_test() as instance:
        requests = _evaluate_schedule(instance, source)
        assert [r.partition_key for r in requests] == ["a", "b"]
        assert sorted(instance.get_dynamic_partitions("trace_runs")) == ["a", "b"]

        done = requests[0]
        result = dg.materialize(
            [raw_tables, marts], partition_key=done.partition_key, instance=instance, run_config=done.run_config,
            tags=done.tags,
            resources={"source": source, "lake": LakeResource(url=str(tmp_path / "lake")),
                       "ingest_settings": IngestSettingsResource()},
        )
        assert result.success and result.dagster_run.tags[FILES_TAG] == done.run_key

        later = _evaluate_schedule(instance, source)
        assert [r.partition_key for r in later] == ["b"]
