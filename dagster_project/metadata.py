"""What Dagster shows of a run's version (:class:`dagster_project.outbox.RunRecord`), the same whether the assets
ran or ``tracelake ingest`` recorded the run: one materialization per raw table, per analysis table and for the
report, each with its metadata, and one result per asset check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dagster as dg

from dagster_project.outbox import MartRecord, RunRecord
from pipelines.tables import RAW_TABLES


@dataclass(frozen=True)
class CheckOutcome:
    """One asset check's result, for an ``AssetCheckResult`` (in a step) or an ``AssetCheckEvaluation`` (recorded)."""

    asset_key: dg.AssetKey
    check_name: str
    passed: bool
    metadata: dict[str, Any]
    description: str


def raw_metadata(record: RunRecord, state: str) -> dict[str, dict[str, Any]]:
    """Per raw table, the metadata of its materialization: rows, traces, errors, the version and its state."""
    counts = record.raw_row_counts or {}
    return {
        table: {
            "dagster/row_count": counts.get(table, 0),
            "traces": record.traces,
            "errors": record.errors,
            "version": record.version,
            "state": state,
            "source": record.source or "",
        }
        for table in RAW_TABLES
    }


def _preview(mart: MartRecord) -> str:
    header = "| " + " | ".join(mart.columns) + " |\n|" + "---|" * len(mart.columns) + "\n"
    return header + "".join("| " + " | ".join(row) + " |\n" for row in mart.preview)


def mart_metadata(record: RunRecord) -> dict[dg.AssetKey, dict[str, Any]]:
    """Per analysis table built, the metadata of its materialization: rows, the snapshot and a preview."""
    return {
        dg.AssetKey(["marts", mart.name]): {
            "dagster/row_count": mart.row_count,
            "snapshot": record.snapshot,
            "preview": dg.MetadataValue.md(_preview(mart)),
        }
        for mart in record.marts
    }


def check_outcomes(record: RunRecord) -> list[CheckOutcome]:
    """Every check of every analysis table built."""
    return [
        CheckOutcome(dg.AssetKey(["marts", check.mart]), check.name, check.passed,
                     {"failing_rows": check.failures, "sample": check.sample}, check.description)
        for check in record.checks
    ]


def version_metadata(record: RunRecord) -> dict[str, Any]:
    """What every event a record posts carries: the version it shows (what a post is idempotent by) and its snapshot,
    and when the ingest committed it. Dagster's public API stamps a runless event with the time of posting, not
    another: the ingest's time is here, for the UI to show beside it."""
    metadata: dict[str, Any] = {"version": record.version, "snapshot": record.snapshot}
    if record.ingested_at is not None:
        metadata["ingested_at"] = dg.MetadataValue.timestamp(record.ingested_at)
    return metadata


def link(url: str) -> dg.MetadataValue:
    """A page in the lake's storage as metadata: a URL, or a local path."""
    return dg.MetadataValue.url(url) if "://" in url else dg.MetadataValue.path(url)


def report_metadata(url: str) -> dict[str, Any]:
    """The report's materialization metadata: a link to the page."""
    return {"report": link(url)}
