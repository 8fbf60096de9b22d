"""What Dagster shows of an ingested run, as plain data, and the records ``tracelake ingest`` leaves for the Dagster
instance that ``tracelake ui`` shows.

An ingest does not import Dagster: its import, the instance and ~110 events a run cost seconds, more than a small
run's whole ingest. It leaves one JSON record per committed run in its lake's outbox, a folder of the Dagster home
keyed by the lake (``HOME/tracelake-records/<lake key>/``, :func:`dagster_project.home.lake_key`): ``tracelake ui
--lake A`` posts the records of lake A alone before it starts, and the code location's ``tracelake_records_sensor``
posts those written while the UI runs (:mod:`dagster_project.record`, through Dagster's public API). A poster holds
a lease on each record it posts (:func:`lease_records`), which it loses when it dies, so its successor posts what it
left; an outbox keeps at most :data:`MAX_RECORDS`. The assets' own steps build the same :class:`RunRecord` from what
they committed, so a run shows alike whichever way it came (:mod:`dagster_project.metadata`).
No Dagster import here: the command line writes records.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb
import orjson

from dagster_project.home import dagster_home, lake_key
from pipelines.lake.lake import ALIAS, Lake
from pipelines.lake.read import read_lake
from pipelines.staging.manifest import StagedRun
from transforms.composition.steps import CommittedRun
from transforms.regressions import RunNotChecked, check_run
from transforms.units import format_change

RECORDS = "tracelake-records"
FORMAT = 2  # 2: per-lake outboxes, ``ingested_at``
MAX_RECORDS = 5000
"""Records an outbox keeps; beyond it, each new record drops the oldest (with a warning). Posting 5,000 runs takes
minutes at ~110 events a run; the lake keeps every run whatever the outbox drops."""
PARTIAL_AGE_S = 3600
"""A record's partial file (``.partial-…``) this old was left by a writer that was killed: removed."""


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
    ingested_at: float | None = None
    """When the commit made this version visible (its snapshot's time, seconds since the epoch); None in the assets'
    own steps, whose events Dagster stamps as they happen."""

    @classmethod
    def of(cls, committed: CommittedRun, report_url: str | None = None,
           gate: CheckRecord | None = None, ingested_at: float | None = None) -> RunRecord:
        """The record of what ``committed`` made visible, the report written after it, the regression gate's
        verdict (:func:`regression_check`) and the commit's time."""
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
            ingested_at=ingested_at,
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
    with read_lake(lake) as con:
        return _gate(con, run_id)


def _gate(con: duckdb.DuckDBPyConnection, run_id: str) -> CheckRecord:
    mart, name = REGRESSION_CHECK
    try:
        check = check_run(con, run_id, top=0)  # the verdict only: the UI links to the run's report
    except RunNotChecked as exc:  # no headline metric to judge (no steps, no kernels, no memory events)
        return CheckRecord(mart, name, True, 0, "", f"not checked: {exc}")
    changes = ", ".join(f"{row['metric']} {format_change(row['change_ratio'])}" for row in check.metrics)
    sample = f"baseline {check.baseline_run_id or 'none (the job’s first run)'}; {changes}"
    return CheckRecord(mart, name, check.passed, len(check.regressions), sample, check.summary())


def committed_records(lake: Lake, runs: Sequence[tuple[CommittedRun, str | None]]) -> list[RunRecord]:
    """The records of runs just committed (each with its report's URL): the regression gate's verdict and the time
    of each run's snapshot, read from the lake in one connection."""
    with read_lake(lake) as con:
        snapshots = ", ".join(str(int(committed.commit.snapshot_id)) for committed, _ in runs) or "null"
        times = dict(con.execute(f"select snapshot_id, epoch(snapshot_time) from {ALIAS}.snapshots() "
                                 f"where snapshot_id in ({snapshots})").fetchall())  # ints: nothing to bind
        return [RunRecord.of(committed, url, _gate(con, committed.built.run_id),
                             times.get(committed.commit.snapshot_id, time.time()))
                for committed, url in runs]


@dataclass(frozen=True)
class Left:
    """Records left in an outbox: where, and the runs of the oldest records dropped to keep :data:`MAX_RECORDS`."""

    home: Path
    folder: Path
    dropped: list[str]


def records_folder(home: Path, lake: Lake) -> Path:
    """Where ``lake``'s records wait in the Dagster home ``home``: its outbox."""
    return home / RECORDS / lake_key(lake)


def _waiting(folder: Path) -> list[Path]:
    """The outbox's records, oldest first (their names start with the time they were left)."""
    return sorted(folder.glob("[!.]*.json")) if folder.is_dir() else []


def leave_records(records: list[RunRecord], lake: Lake, *, keep: int = MAX_RECORDS) -> Left:
    """Leave ``records`` in ``lake``'s outbox (in its Dagster home, :func:`dagster_home`), each whole or not at all;
    then drop the oldest beyond ``keep`` and the partial files of killed writers."""
    home = dagster_home(lake)
    folder = records_folder(home, lake)
    folder.mkdir(parents=True, exist_ok=True)
    for record in records:
        run = re.sub(r"[^A-Za-z0-9._-]+", "_", record.run_id)[:60]
        name = f"{time.time_ns():020d}-{run}-{record.snapshot}-{secrets.token_hex(4)}.json"
        partial = folder / f".partial-{name}"
        partial.write_bytes(orjson.dumps({"format": FORMAT, **asdict(record)}))
        partial.replace(folder / name)
    waiting = _waiting(folder)
    dropped = waiting[:max(0, len(waiting) - keep)]
    for path in dropped:
        path.unlink(missing_ok=True)  # a poster holding it finds it gone (:func:`lease_records`)
    for partial in folder.glob(".partial-*"):
        try:
            if time.time() - partial.stat().st_mtime > PARTIAL_AGE_S:
                partial.unlink()
        except FileNotFoundError:  # renamed into place meanwhile
            pass
    return Left(home, folder, [path.name.split("-", 1)[1].rsplit("-", 2)[0] for path in dropped])


@dataclass(frozen=True)
class Lease:
    """A record this process holds the lease of: its bytes, and its path, to remove once posted."""

    path: Path
    data: bytes

    def done(self) -> None:
        """The record is posted: remove it (still under the lease, so no other poster can take it up again)."""
        self.path.unlink(missing_ok=True)  # missing: dropped by a writer's pruning meanwhile

    def set_aside(self) -> Path:
        """The record cannot be read: renamed ``.unreadable-…``, out of every poster's way; returns its new path."""
        aside = self.path.with_name(f".unreadable-{self.path.name}")
        self.path.rename(aside)
        return aside


def lease_records(folder: Path) -> Iterator[Lease]:
    """Each waiting record of the outbox ``folder``, oldest first, leased by this process while it is handled.

    The lease is an exclusive ``flock`` of the record's file, which the kernel releases when its holder dies (a
    poster killed mid-post), so the next poster takes the record up again; a record another live poster holds is
    passed by. After the lock, the path must still name the locked file: otherwise it was posted and removed
    between this process opening it and locking it.
    """
    for path in _waiting(folder):
        try:
            file = path.open("rb")
        except FileNotFoundError:  # posted by another poster meanwhile
            continue
        with file:  # closing it releases the lease
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a live poster holds it
                continue
            try:
                current = os.stat(path).st_ino == os.fstat(file.fileno()).st_ino
            except FileNotFoundError:
                current = False
            if current:
                yield Lease(path, file.read())
