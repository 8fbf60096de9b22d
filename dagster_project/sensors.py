"""``trace_runs_sensor``: ingest runs as their traces land, and again when their file set changes.

Listing strategy and cursor layout: see :mod:`pipelines.watch`. The run key is
``run_id@fingerprint``, so a tick that sees the same files again launches nothing.
"""

from __future__ import annotations

import dagster as dg

from dagster_project.jobs import ingest_job
from dagster_project.partitions import trace_runs
from dagster_project.resources import TraceSourceResource
from dagster_project.run_requests import ingest_request
from pipelines.settings import SENSOR_INTERVAL_S
from pipelines.watch import WatchState, scan

# Definition-time setting (Dagster reads it when loading the code location), not a resource.
INTERVAL_S = int(SENSOR_INTERVAL_S.number())


@dg.sensor(job=ingest_job, minimum_interval_seconds=INTERVAL_S, default_status=dg.DefaultSensorStatus.STOPPED)
def trace_runs_sensor(context: dg.SensorEvaluationContext, source: TraceSourceResource) -> dg.SensorResult:
    """Register new runs as partitions and ingest every run whose file set is new or changed."""
    changes, state, settling = scan(
        source.url, source.options(), WatchState.from_cursor(context.cursor),
        full_pass_every=source.full_pass_every, settle_s=source.settle_seconds,
    )
    new = [c.run_id for c in changes if c.is_new]
    if changes:
        context.log.info(f"{len(changes)} runs changed ({len(new)} new): {', '.join(c.run_key for c in changes[:20])}")
    if settling:
        context.log.info(f"{len(settling)} runs still being written, for a later tick: {', '.join(settling[:20])}")
    return dg.SensorResult(
        run_requests=[ingest_request(c) for c in changes],
        dynamic_partitions_requests=[trace_runs.build_add_request(new)] if new else [],
        cursor=state.to_cursor(),
    )
