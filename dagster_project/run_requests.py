"""The run request that ingests one run's current file set; shared by the sensor and the schedule."""

from __future__ import annotations

import dagster as dg

from pipelines.watch import RunChange

FILES_TAG = "tracelake/files"
"""Run tag naming the file set a run ingested (``run_id@fingerprint``)."""


def ingest_request(change: RunChange) -> dg.RunRequest:
    """Materialize the run's raw tables, marts and report for exactly this file set."""
    return dg.RunRequest(
        run_key=change.run_key,
        partition_key=change.run_id,
        run_config={"ops": {"raw_tables": {"config": {"run_url": change.url}}}},  # mapped onto list_traces
        tags={FILES_TAG: change.run_key},
    )
