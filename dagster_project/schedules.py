"""``trace_runs_schedule``: the sensor's work at fixed times, for deployments that run no sensors.

A schedule has no cursor, so every tick is a full listing, and the file sets already ingested
come from the instance's run tags (one query), which the sensor's runs carry too: running both
never ingests a file set twice.
"""

from __future__ import annotations

import dagster as dg

from dagster_project.jobs import ingest_job
from dagster_project.partitions import TRACE_RUNS
from dagster_project.resources import TraceSourceResource
from dagster_project.run_requests import FILES_TAG, ingest_request
from pipelines.settings import SCHEDULE_CRON
from pipelines.watch import WatchState, scan

CRON = SCHEDULE_CRON.text()


@dg.schedule(job=ingest_job, cron_schedule=CRON, default_status=dg.DefaultScheduleStatus.STOPPED)
def trace_runs_schedule(context: dg.ScheduleEvaluationContext, source: TraceSourceResource) -> list[dg.RunRequest]:
    """List the source and ingest every run whose current file set no run has ingested yet."""
    changes, _, _ = scan(source.url, source.options(), WatchState(), settle_s=source.settle_seconds)
    launched = {value for _, values in context.instance.get_run_tags([FILES_TAG]) for value in values}
    pending = [c for c in changes if c.run_key not in launched]
    known = set(context.instance.get_dynamic_partitions(TRACE_RUNS))
    context.instance.add_dynamic_partitions(TRACE_RUNS, [c.run_id for c in pending if c.run_id not in known])
    return [ingest_request(c) for c in pending]
