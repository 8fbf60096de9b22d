"""The records ``tracelake ingest`` left (:mod:`dagster_project.outbox`), posted to a Dagster instance through its
public API: each run's partition, one materialization per asset with its metadata, and the checks' results.
``tracelake ui`` posts them before it starts; ``tracelake_records_sensor`` posts those that come while it runs."""

from __future__ import annotations

import logging
from pathlib import Path

import dagster as dg

from dagster_project.home import dagster_home, opening_instance
from dagster_project.metadata import check_outcomes, mart_metadata, raw_metadata, report_metadata
from dagster_project.outbox import RunRecord, claim_records
from dagster_project.partitions import TRACE_RUNS
from pipelines.settings import SENSOR_INTERVAL_S

log = logging.getLogger(__name__)


def open_instance() -> dg.DagsterInstance:
    """The persistent instance under DAGSTER_HOME, by default ``~/.tracelake/dagster``."""
    home = dagster_home()
    with opening_instance(home):
        return dg.DagsterInstance.get()


def _events(record: RunRecord) -> list[dg.AssetMaterialization | dg.AssetCheckEvaluation]:
    """The run's materializations, then its check results. Check results go without a partition: Dagster keeps one
    runless result per check, asset and partition, so a partition's second ingest could not record them again."""
    partition = record.run_id
    metadata = raw_metadata(record, "committed") if record.raw_row_counts is not None else {}
    events: list[dg.AssetMaterialization | dg.AssetCheckEvaluation] = [
        dg.AssetMaterialization(asset_key=["raw", table], partition=partition, metadata=values)
        for table, values in metadata.items()
    ]
    events += [dg.AssetMaterialization(asset_key=key, partition=partition, metadata=values)
               for key, values in mart_metadata(record).items()]
    if record.report_url:
        events.append(dg.AssetMaterialization(asset_key=["report"], partition=partition,
                                              metadata=report_metadata(record.report_url)))
    events += [dg.AssetCheckEvaluation(asset_key=check.asset_key, check_name=check.check_name, passed=check.passed,
                                       metadata=check.metadata, description=check.description)
               for check in check_outcomes(record)]
    return events


def post_records(instance: dg.DagsterInstance) -> list[str]:
    """Post every record waiting in ``instance``'s home; returns the runs posted. A record that cannot be read is
    left aside (renamed ``.unreadable-…``) with a warning, never posted half."""
    posted = []
    for claimed, data in claim_records(Path(instance.root_directory)):
        try:
            record = RunRecord.from_json(data)
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("tracelake: cannot read the run record %s (%s); left aside", claimed, exc)
            claimed.rename(claimed.with_name(f".unreadable-{claimed.name}"))
            continue
        instance.add_dynamic_partitions(TRACE_RUNS, [record.run_id])  # adds only partitions not there yet
        for event in _events(record):
            instance.report_runless_asset_event(event)
        claimed.unlink()
        posted.append(record.run_id)
    return posted


@dg.sensor(minimum_interval_seconds=int(SENSOR_INTERVAL_S.number()), default_status=dg.DefaultSensorStatus.RUNNING)
def tracelake_records_sensor(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    """Post the records of runs that ``tracelake ingest`` committed since the last look."""
    posted = post_records(context.instance)
    return dg.SkipReason(f"posted {len(posted)} ingested runs: {', '.join(posted)}" if posted else "no new runs")
