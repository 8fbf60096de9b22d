"""The Dagster code location: ``dagster_project.definitions:defs``."""

from __future__ import annotations

import dagster as dg

from dagster_project.assets.marts import marts
from dagster_project.assets.raw import raw_tables
from dagster_project.assets.report import fleet_view, report
from dagster_project.jobs import ingest_job
from dagster_project.maintenance import maintain_lake_job, maintain_lake_schedule
from dagster_project.record import tracelake_records_sensor
from dagster_project.resources import default_resources
from dagster_project.schedules import trace_runs_schedule
from dagster_project.sensors import trace_runs_sensor

defs = dg.Definitions(
    assets=[raw_tables, marts, report, fleet_view],
    jobs=[ingest_job, maintain_lake_job],
    sensors=[trace_runs_sensor, tracelake_records_sensor],
    schedules=[trace_runs_schedule, maintain_lake_schedule],
    resources=default_resources(),
)
