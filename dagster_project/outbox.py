"""What Dagster shows of an ingested run, as plain data, and the records ``tracelake ingest`` leaves for the Dagster
instance that ``tracelake ui`` shows.

An ingest does not import Dagster: its import, the instance and ~110 events a run cost seconds, more than a small
run's whole ingest. It leaves one JSON record per committed run in the instance's home
(``DAGSTER_HOME/tracelake-records/``); ``tracelake ui`` posts the waiting records to the instance before it starts,
and the code location's ``tracelake_records_sensor`` posts those written while the UI runs
(:mod:`dagster_project.record`, through Dagster's public API). The assets' own steps build the same
:class:`RunRecord` from what they committed, so a run shows alike whichever way it came (:mod:`dagster_project.metadata`).
No Dagster import here: the command line writes records.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import orjson

from dagster_project.home import dagster_home
from pipelines.lake.lake import Lake
from pipelines.lake.read import read_lake
from pipelines.staging.manifest import StagedRun
from transforms.composition.steps import CommittedRun
from transforms.regressions import RunNotChecked, check_run
from transforms.units import format_change

RECORDS = "tracelake-records"
FORMAT = 1


@dataclass(frozen=True)
class MartRecord:
    """One analysis table as built: rows, its columns and the first rows (as text)."""

    name: str
    row_count: int
    columns: list[str]
    preview: list[list[str]]


@dataclass(frozen=True)
class CheckRecord:
    """One asset check of an analysis table."""

    mart: str
    name: str
    passed: bool
    failures: int
    sample: str
    description: str


@dataclass(frozen=True)
class RunRecord:
    """One committed version of a run, as Dagster shows it."""

    run_id: str
    snapshot: int
    version: str
    source: str | None
    traces: int
    errors: int
    raw_row_counts: dict[str, int] | None
    """Rows per raw table; None for a rebuild of the analysis tables alone."""
    marts: list[MartRecord] = field(default_factory=list)
    checks: list[CheckRecord] = field(default_factory=list)
    report_url: str | None = None

    @classmethod
    def of(cls, committed: CommittedRun, report_url: str | None = None,
           gate: CheckRecord | None = None) -> RunRecord:
        """The record of what ``committed`` made visible, the report written after it and the regression gate's
        verdict (:func:`regression_check`)."""
        staged, built = committed.staged, committed.built
        return cls(
            run_id=built.run_id,
            snapshot=committed.commit.snapshot_id,
            version=built.version,
            source=staged.run.url if staged else None,
            traces=len(staged.traces) if staged else 0,
            errors=len(staged.errors) if staged else 0,
            raw_row_counts=dict(staged.row_counts) if staged else None,
            marts=[MartRecord(m.name, m.row_count, m.columns, [[str(v) for v in row] for row in m.preview])
                   for m in built.marts],
            checks=[CheckRecord(c.mart, c.name, c.passed, c.failures, str(c.sample[:3]), c.description)
                    for m in built.marts for c in m.checks] + ([gate] if gate else []),
            report_url=report_url,
        )

    @classmethod
    def of_staged(cls, staged: StagedRun) -> RunRecord:
        """The record of a run's raw tables staged, not yet committed (no snapshot)."""
        return cls(staged.run.run_id, -1, staged.version, staged.run.url, len(staged.traces), len(staged.errors),
                   dict(staged.row_counts))

    @classmethod
    def from_json(cls, data: bytes) -> RunRecord:
        """A record written by :func:`leave_records`."""
        document = orjson.loads(data)
        if document.pop("format", None) != FORMAT:
            raise ValueError(f"not a tracelake run record of format {FORMAT}")
        return cls(**{**document, "marts": [MartRecord(**m) for m in document["marts"]],
                      "checks": [CheckRecord(**c) for c in document["checks"]]})


REGRESSION_CHECK = ("run_metrics", "no_regression")
"""The regression gate on each new run, as ``tracelake check RUN`` evaluates it: a check of ``marts/run_metrics``."""


def regression_check(lake: Lake, run_id: str) -> CheckRecord:
    """The run's verdict against its job's previous run (``run_regressions``), read from the lake after its commit."""
    mart, name = REGRESSION_CHECK
    with read_lake(lake) as con:
        try:
            check = check_run(con, run_id, top=0)  # the verdict only: the UI links to the run's report
        except RunNotChecked as exc:  # no headline metric to judge (no steps, no kernels, no memory events)
            return CheckRecord(mart, name, True, 0, "", f"not checked: {exc}")
    changes = ", ".join(f"{row['metric']} {format_change(row['change_ratio'])}" for row in check.metrics)
    sample = f"baseline {check.baseline_run_id or 'none (the job’s first run)'}; {changes}"
    return CheckRecord(mart, name, check.passed, len(check.regressions), sample, check.summary())


def records_folder(home: Path | None = None) -> Path:
    """Where records wait: in the Dagster home (``DAGSTER_HOME``, else ``~/.tracelake/dagster``)."""
    return (home or dagster_home()) / RECORDS


def leave_records(records: list[RunRecord], home: Path | None = None) -> Path:
    """Leave ``records`` for the instance of ``home``, each whole or not at all; returns the folder."""
    folder = records_folder(home)
    folder.mkdir(parents=True, exist_ok=True)
    for record in records:
        name = f"{record.run_id}-{record.snapshot}-{secrets.token_hex(4)}.json"
        partial = folder / f".{name}"
        partial.write_bytes(orjson.dumps({"format": FORMAT, **asdict(record)}))
        partial.replace(folder / name)
    return folder


def claim_records(home: Path) -> Iterator[tuple[Path, bytes]]:
    """Each waiting record of ``home``, oldest first, claimed by this process (renamed away, so that two processes
    posting at once never post one twice): its claimed path, to delete once posted, and its bytes."""
    folder = records_folder(home)
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("[!.]*.json"), key=lambda p: p.stat().st_mtime_ns):
        claimed = path.with_name(f".claimed-{os.getpid()}-{path.name}")
        try:
            path.rename(claimed)
        except FileNotFoundError:  # another process claimed it first
            continue
        yield claimed, claimed.read_bytes()
