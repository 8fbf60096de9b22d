"""Data-quality findings: one row per problem found in a trace (the ``quality_issues`` table)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pyarrow as pa

QUALITY_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("severity", pa.string()),
        ("code", pa.string()),
        ("message", pa.string()),
        ("count", pa.int64()),
    ]
)


@dataclass(frozen=True)
class QualityIssue:
    """A problem in one trace of a run. ``severity`` is ``error`` or ``warning``."""

    run_id: str
    trace_id: str
    severity: str
    code: str
    message: str
    count: int = 1

    def line(self, source: str) -> str:
        """The one line shown to the user: severity, file, problem."""
        return f"{self.severity.upper()} {source}: {self.message} [{self.code}]"


def quality_table(issues: list[QualityIssue]) -> pa.Table:
    """The ``quality_issues`` rows of one run (``run_id`` lives in the partition path)."""
    rows = [{k: v for k, v in asdict(issue).items() if k != "run_id"} for issue in issues]
    return pa.Table.from_pylist(rows, schema=QUALITY_SCHEMA)
