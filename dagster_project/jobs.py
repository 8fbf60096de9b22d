"""The job that ingests one run: raw tables, then every mart and the report of the run."""

from __future__ import annotations

import dagster as dg

from dagster_project.assets.marts import marts
from dagster_project.assets.raw import raw_tables
from dagster_project.assets.report import report

ingest_job = dg.define_asset_job(
    "ingest_run",
    selection=dg.AssetSelection.assets(raw_tables, marts, report),
    description="Ingest one run's traces into the raw tables, then build every mart and the report of the run.",
)
