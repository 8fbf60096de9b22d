"""Data checks on a built mart: each is a query whose rows are the failures."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from transforms.models import SqlModel


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


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def check_queries(model: SqlModel, columns: list[str], sql_root: Path) -> dict[str, tuple[str, str]]:
    """Check name → (description, failing-rows query) for a mart with the given columns.

    Derived from naming rules (grain unique, ``*_ratio`` in [0, 1], ``*_ns`` durations not negative)
    plus every ``sql/checks/<mart>__<check>.sql`` file.
    """
    table = _quote(model.name)
    grain = ", ".join(_quote(c) for c in model.grain)
    checks = {
        "grain_unique": (
            f"one row per ({', '.join(model.grain)})",
            f"select {grain}, count(*) as n from {table} group by all having count(*) > 1",
        )
    }
    ratios = [c for c in columns if c.endswith("_ratio")]
    if ratios:
        bad = " or ".join(f"{_quote(c)} not between 0 and 1" for c in ratios)
        checks["ratios_in_unit_interval"] = (f"{', '.join(ratios)} within [0, 1]", f"select * from {table} where {bad}")
    durations = [c for c in columns if c.endswith("_ns") and not c.endswith(("ts_ns", "start_ns", "end_ns"))]
    if durations:
        bad = " or ".join(f"{_quote(c)} < 0" for c in durations)
        checks["no_negative_durations"] = (f"{', '.join(durations)} not negative", f"select * from {table} where {bad}")
    for path in sorted((sql_root / "checks").glob(f"{model.name}__*.sql")):
        text = path.read_text()
        description = " ".join(line.lstrip("-").strip() for line in text.splitlines() if line.startswith("--"))
        checks[path.stem.split("__", 1)[1]] = (description, text)
    return checks


def run_checks(
    con: duckdb.DuckDBPyConnection, model: SqlModel, columns: list[str], sql_root: Path
) -> list[CheckResult]:
    """Run every check of ``model`` against its temp table in ``con``."""
    results = []
    for name, (description, query) in check_queries(model, columns, sql_root).items():
        rows = con.execute(f"select * from ({query}) limit 5").fetchall()
        failures = con.execute(f"select count(*) from ({query})").fetchone()
        results.append(CheckResult(model.name, name, description, failures[0] if failures else 0, rows))
    return results
