"""The records ``tracelake ingest`` left in a lake's outbox (:mod:`dagster_project.outbox`), posted to a Dagster
instance through its public API: each run's partition, one materialization per asset with its metadata, and the
checks' results. ``tracelake ui`` posts them before it starts; ``tracelake_records_sensor`` posts those that come
while it runs. Posts are idempotent: what an instance holds of a record's version is not posted again, so a post
cut short (a poster killed) is completed by the next, each event once."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import dagster as dg

from dagster_project.home import opening_instance
from dagster_project.metadata import check_outcomes, mart_metadata, raw_metadata, report_metadata, version_metadata
from dagster_project.outbox import RunRecord, lease_records, records_folder
from dagster_project.partitions import TRACE_RUNS
from dagster_project.resources import LakeResource
from pipelines.lake.lake import Lake
from pipelines.settings import SENSOR_INTERVAL_S

log = logging.getLogger(__name__)

BATCH = 100
"""Runs posted between two progress lines."""

Event = dg.AssetMaterialization | dg.AssetCheckEvaluation


def open_instance(home: Path) -> dg.DagsterInstance:
    """The persistent instance of the Dagster home ``home``, opened from it (the environment is left as it is)."""
    with opening_instance(home):
        return dg.DagsterInstance.from_config(str(home))


def _events(record: RunRecord) -> list[Event]:
    """The run's materializations but its last, its check results, then its last materialization.

    Check results go without a partition: Dagster keeps one runless result per check, asset and partition, so a
    partition's second ingest could not record them again. Posted in this order, a post cut short has posted a
    prefix, and a record whose last event is posted is posted whole (:func:`_unposted`).
    """
    partition, common = record.run_id, version_metadata(record)
    raw = raw_metadata(record, "committed") if record.raw_row_counts is not None else {}
    materializations = [dg.AssetMaterialization(asset_key=["raw", table], partition=partition,
                                                metadata={**values, **common})
                        for table, values in raw.items()]
    materializations += [dg.AssetMaterialization(asset_key=key, partition=partition, metadata={**values, **common})
                         for key, values in mart_metadata(record).items()]
    if record.report_url:
        materializations.append(dg.AssetMaterialization(asset_key=["report"], partition=partition,
                                                        metadata={**report_metadata(record.report_url), **common}))
    checks: list[Event] = [
        dg.AssetCheckEvaluation(asset_key=check.asset_key, check_name=check.check_name, passed=check.passed,
                                metadata={**check.metadata, **common}, description=check.description)
        for check in check_outcomes(record)]
    return [*materializations[:-1], *checks, *materializations[-1:]]


def _version(metadata: Mapping[str, Any]) -> object:
    return getattr(metadata.get("version"), "value", None)


def _posted(instance: dg.DagsterInstance, event: Event, version: str) -> bool:
    """Whether ``instance`` holds ``event`` of the record of ``version``: a materialization of its asset and
    partition of that version, or a check whose latest result is of that version."""
    if isinstance(event, dg.AssetCheckEvaluation):
        key = dg.AssetCheckKey(event.asset_key, event.check_name)
        latest = instance.event_log_storage.get_latest_asset_check_execution_by_key([key]).get(key)
        entry = latest.event.dagster_event if latest and latest.event else None
        evaluation = entry.event_specific_data if entry else None
        return isinstance(evaluation, dg.AssetCheckEvaluation) and _version(evaluation.metadata) == version
    records_filter = dg.AssetRecordsFilter(asset_key=event.asset_key, asset_partitions=[event.partition or ""])
    cursor = None
    while True:  # a partition holds one materialization per ingest of its run: a page, mostly
        page = instance.fetch_materializations(records_filter, limit=100, cursor=cursor)
        if any(r.asset_materialization and _version(r.asset_materialization.metadata) == version
               for r in page.records):
            return True
        if not page.has_more:
            return False
        cursor = page.cursor


def _unposted(instance: dg.DagsterInstance, events: list[Event], version: str) -> list[Event]:
    """What ``instance`` does not hold yet of a record's ``events``: none when the last is there, all when the first
    is not (two queries for a record posted or not); else (a post cut short) each event is looked up."""
    if not events or _posted(instance, events[-1], version):
        return []
    if not _posted(instance, events[0], version):
        return events
    return [event for event in events if not _posted(instance, event, version)]


def post_records(instance: dg.DagsterInstance, lake: Lake, batch: int = BATCH) -> Iterator[list[str]]:
    """Post every record of ``lake`` waiting in ``instance``'s home, each under its lease (a record another poster
    holds is left to it); yields the runs posted, ``batch`` at a time. A record that cannot be read is left aside
    (renamed ``.unreadable-…``) with a warning, never posted half."""
    posted: list[str] = []
    for lease in lease_records(records_folder(Path(instance.root_directory), lake)):
        try:
            record = RunRecord.from_json(lease.data)
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("tracelake: cannot read the run record %s (%s); left aside as %s", lease.path, exc,
                        lease.set_aside().name)
            continue
        instance.add_dynamic_partitions(TRACE_RUNS, [record.run_id])  # adds only partitions not there yet
        for event in _unposted(instance, _events(record), record.version):
            instance.report_runless_asset_event(event)
        lease.done()
        posted.append(record.run_id)
        if len(posted) == batch:
            yield posted
            posted = []
    if posted:
        yield posted


@dg.sensor(minimum_interval_seconds=int(SENSOR_INTERVAL_S.number()), default_status=dg.DefaultSensorStatus.RUNNING)
def tracelake_records_sensor(context: dg.SensorEvaluationContext, lake: LakeResource) -> dg.SkipReason:
    """Post the records of the lake's runs that ``tracelake ingest`` committed since the last look."""
    posted = [run for runs in post_records(context.instance, lake.lake()) for run in runs]
    return dg.SkipReason(f"posted {len(posted)} ingested runs of {lake.url}: {', '.join(posted)}" if posted
                         else "no new runs")
