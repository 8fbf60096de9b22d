"""Data-quality findings: one row per problem found in a trace (the ``quality_issues`` table)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

QUALITY_COLUMNS = {
    "trace_id": "VARCHAR",
    "severity": "VARCHAR",
    "code": "VARCHAR",
    "message": "VARCHAR",
    "count": "BIGINT",
}


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


def quality_rows(issues: list[QualityIssue]) -> list[dict[str, object]]:
    """The ``quality_issues`` rows of one run (``run_id`` lives in the partition path)."""
    return [{k: v for k, v in asdict(issue).items() if k != "run_id"} for issue in issues]
