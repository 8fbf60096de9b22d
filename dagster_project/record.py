"""``tracelake ingest``'s record in the Dagster instance that ``tracelake ui`` shows: each ingested run's partition,
one materialization per asset with the metadata the assets attach (:mod:`dagster_project.metadata`) and the asset
checks' results, through Dagster's public API. The ingest itself never runs Dagster.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from dagster_project.home import dagster_home, opening_instance
from dagster_project.metadata import check_outcomes, mart_metadata, raw_metadata, report_metadata
from dagster_project.partitions import TRACE_RUNS
from transforms.composition.ingest import IngestedRun


def open_instance() -> dg.DagsterInstance:
    """The persistent instance under DAGSTER_HOME, by default ``~/.tracelake/dagster``."""
    home = dagster_home()
    with opening_instance(home):
        return dg.DagsterInstance.get()


def record_runs(instance: dg.DagsterInstance, runs: Sequence[IngestedRun]) -> None:
    """Record ``runs`` as runless asset events of their partitions.

    Check results are recorded without a partition: Dagster keeps one runless result per check, asset and
    partition, so a partition's second ingest could not record its checks again."""
    instance.add_dynamic_partitions(TRACE_RUNS, [run.committed.built.run_id for run in runs])
    for run in runs:
        committed, partition = run.committed, run.committed.built.run_id
        events: list[dg.AssetMaterialization | dg.AssetCheckEvaluation] = []
        if committed.staged is not None:
            events += [dg.AssetMaterialization(asset_key=["raw", table], partition=partition, metadata=metadata)
                       for table, metadata in raw_metadata(committed.staged, "committed").items()]
        events += [dg.AssetMaterialization(asset_key=key, partition=partition, metadata=metadata)
                   for key, metadata in mart_metadata(committed).items()]
        events += [dg.AssetCheckEvaluation(asset_key=check.asset_key, check_name=check.check_name,
                                           passed=check.passed, metadata=check.metadata,
                                           description=check.description)
                   for check in check_outcomes(committed)]
        if run.report_url:
            events.append(dg.AssetMaterialization(asset_key=["report"], partition=partition,
                                                  metadata=report_metadata(run.report_url)))
        for event in events:
            instance.report_runless_asset_event(event)
