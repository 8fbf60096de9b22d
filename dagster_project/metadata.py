"""What Dagster shows of an ingested run, the same whether the assets ran (``dagster_project.assets``) or
``tracelake ingest`` recorded the run (``dagster_project.record``): one materialization per raw table, per analysis
table and for the report, each with its metadata, and one result per asset check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dagster as dg

from pipelines.staging.manifest import StagedRun
from pipelines.tables import RAW_TABLES
from transforms.composition.steps import CommittedRun
from transforms.runner import MartResult


@dataclass(frozen=True)
class CheckOutcome:
    """One asset check's result, for an ``AssetCheckResult`` (in a step) or an ``AssetCheckEvaluation`` (recorded)."""

    asset_key: dg.AssetKey
    check_name: str
    passed: bool
    metadata: dict[str, Any]
    description: str


def raw_metadata(staged: StagedRun, state: str) -> dict[str, dict[str, Any]]:
    """Per raw table, the metadata of its materialization: rows, traces, errors, the version and its state."""
    return {
        table: {
            "dagster/row_count": staged.row_counts.get(table, 0),
            "traces": len(staged.traces),
            "errors": len(staged.errors),
            "version": staged.version,
            "state": state,
            "source": staged.run.url,
        }
        for table in RAW_TABLES
    }


def _preview(result: MartResult) -> str:
    header = "| " + " | ".join(result.columns) + " |\n|" + "---|" * len(result.columns) + "\n"
    return header + "".join("| " + " | ".join(str(v) for v in row) + " |\n" for row in result.preview)


def mart_metadata(committed: CommittedRun) -> dict[dg.AssetKey, dict[str, Any]]:
    """Per analysis table built, the metadata of its materialization: rows, the snapshot and a preview."""
    return {
        dg.AssetKey(["marts", mart.name]): {
            "dagster/row_count": mart.row_count,
            "snapshot": committed.commit.snapshot_id,
            "preview": dg.MetadataValue.md(_preview(mart)),
        }
        for mart in committed.built.marts
    }


def check_outcomes(committed: CommittedRun) -> list[CheckOutcome]:
    """Every check of every analysis table built."""
    return [
        CheckOutcome(dg.AssetKey(["marts", mart.name]), check.name, check.passed,
                     {"failing_rows": check.failures, "sample": str(check.sample[:3])}, check.description)
        for mart in committed.built.marts
        for check in mart.checks
    ]


def link(url: str) -> dg.MetadataValue:
    """A page in the lake's storage as metadata: a URL, or a local path."""
    return dg.MetadataValue.url(url) if "://" in url else dg.MetadataValue.path(url)


def report_metadata(url: str) -> dict[str, Any]:
    """The report's materialization metadata: a link to the page."""
    return {"report": link(url)}
