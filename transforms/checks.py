"""Data checks on a built mart: each is a query whose rows are the failures."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from pipelines.quality import QualityIssue
from pipelines.rows import one
from transforms.models import SqlModel
from transforms.units import is_duration, is_ratio


@dataclass(frozen=True)
class CheckResult:
    """One check of one mart."""

    mart: str
    name: str
    description: str
    failures: int
    sample: list[tuple[object, ...]]

    @property
    def passed(self) -> bool:
        """True when the check found no failing rows."""
        return self.failures == 0

    def quality_issue(self, run_id: str) -> QualityIssue:
        """The failed check as a quality issue of its run: what it looks for, and the first failing rows."""
        first = "; ".join(str(row) for row in self.sample[:3])
        return QualityIssue(run_id, "", "warning", f"check_failed:{self.mart}:{self.name}",
                            f"check {self.mart}:{self.name} failed on {self.failures} rows: {self.description} "
                            f"(first: {first})", self.failures)


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _check_files(model: SqlModel, sql_root: Path) -> dict[str, Path]:
    """``sql/checks/<mart>__<check>.sql`` files of a mart, by check name."""
    return {p.stem.split("__", 1)[1]: p for p in sorted((sql_root / "checks").glob(f"{model.name}__*.sql"))}


def check_names(model: SqlModel, sql_root: Path) -> list[str]:
    """The checks of a mart, known before it runs (Dagster declares them up front)."""
    return ["grain_unique", "value_ranges", *_check_files(model, sql_root)]


def check_queries(model: SqlModel, columns: list[str], sql_root: Path) -> dict[str, tuple[str, str]]:
    """Check name → (description, failing-rows query) for a mart with the given columns.

    ``grain_unique`` from the ``-- grain:`` header; ``value_ranges`` from naming rules (``*_ratio``
    within [0, 1], ``*_ns`` durations not negative); one more per ``sql/checks/<mart>__<check>.sql``.
    """
    table = _quote(model.name)
    grain = ", ".join(_quote(c) for c in model.grain)
    ratios = [c for c in columns if is_ratio(c)]
    durations = [c for c in columns if is_duration(c)]
    violations = [f"{_quote(c)} not between 0 and 1" for c in ratios] + [f"{_quote(c)} < 0" for c in durations]
    checks = {
        "grain_unique": (
            f"one row per ({', '.join(model.grain)})",
            f"select {grain}, count(*) as n from {table} group by all having count(*) > 1",
        ),
        "value_ranges": (
            "ratios within [0, 1] and durations not negative",
            f"select * from {table} where {' or '.join(violations) or 'false'}",
        ),
    }
    for name, path in _check_files(model, sql_root).items():
        text = path.read_text()
        description = " ".join(line.lstrip("-").strip() for line in text.splitlines() if line.startswith("--"))
        checks[name] = (description, text)
    return checks


def run_checks(
    con: duckdb.DuckDBPyConnection, model: SqlModel, columns: list[str], sql_root: Path
) -> tuple[int, list[CheckResult]]:
    """The rows of ``model``'s table in ``con`` and every check of it, counted in one statement; the first failing
    rows are read only for a check that failed (most pass)."""
    queries = check_queries(model, columns, sql_root)
    counts = ", ".join(f"(select count(*) from ({query}))" for _, query in queries.values())
    rows, *failures = one(con.execute(f"select (select count(*) from {_quote(model.name)}), {counts}"))
    return rows, [
        CheckResult(model.name, name, description, failed,
                    con.execute(f"select * from ({query}) limit 5").fetchall() if failed else [])
        for (name, (description, query)), failed in zip(queries.items(), failures, strict=True)
    ]
