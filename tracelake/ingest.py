"""``tracelake ingest``: every run under a source, through the composition's steps, then the Dagster record.

One run is ingested in this process. Several are ingested by worker processes, ``--jobs`` at a time: a worker that
dies (a crash in a native library, the kernel's OOM killer) costs only the run it was ingesting, which is reported.
"""

from __future__ import annotations

import logging
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from dagster_project.outbox import MAX_RECORDS, committed_records, leave_records
from pipelines.lake.lake import Lake
from pipelines.scratch import sweep_dead_scratch
from pipelines.sources import RunSource, discover_runs
from pipelines.storage import redact
from tracelake.progress_bar import ingest_progress
from transforms.composition.ingest import IngestedRun, IngestSettings, ingest_run
from transforms.composition.steps import PROGRESS
from transforms.report.files import write_fleet_view
from transforms.units import plural


class _Printer(logging.Handler):
    """Prints progress lines to stdout (credentials redacted) and counts the error lines among them."""

    def __init__(self) -> None:
        super().__init__()
        self.errors = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.errors += 1
        print(redact(record.getMessage()), file=sys.stdout, flush=True)


@dataclass(frozen=True)
class _Target:
    """Where runs go and how, in a form that crosses to worker processes."""

    lake_url: str
    catalog: str | None
    storage_options: dict[str, Any] | None
    settings: IngestSettings
    bars: bool = False
    """Progress bars (stdout is a terminal that one run at a time writes to), else plain lines."""


@dataclass(frozen=True)
class RunOutcome:
    """One run's ingest as the command saw it: what landed (None when nothing did) and the error lines it printed."""

    run_id: str
    ingested: IngestedRun | None
    errors: int


def _ingest_one(target: _Target, run: RunSource, position: str) -> RunOutcome:
    """Ingest one run, printing its progress; an exception becomes an error line (the next runs go on)."""
    printer = _Printer()
    PROGRESS.addHandler(printer)
    PROGRESS.setLevel(logging.INFO)
    PROGRESS.propagate = False
    try:
        print(f"[{position}] run {run.run_id}: {plural(len(run.traces), 'trace')}", flush=True)
        lake = Lake(target.lake_url, target.storage_options, target.catalog)
        try:
            with ingest_progress(bars=target.bars):
                ingested = ingest_run(run, lake, source_options=target.storage_options, settings=target.settings)
        except Exception as exc:  # the previous version of the run is left whole: say why, go on with the next
            PROGRESS.error("ERROR run %s: %s: %s", run.run_id, type(exc).__name__, exc)
            return RunOutcome(run.run_id, None, printer.errors)
        return RunOutcome(run.run_id, ingested, printer.errors)
    finally:
        PROGRESS.removeHandler(printer)


def _record(lake: Lake, landed: list[IngestedRun]) -> None:
    """Leave the runs' records, with the regression gate's verdict on each and its commit's time, in the lake's
    outbox for the Dagster instance ``tracelake ui`` shows (:mod:`dagster_project.outbox`)."""
    left = leave_records(committed_records(lake, [(run.committed, run.report_url) for run in landed]), lake)
    print(f"recorded {plural(len(landed), 'run')} for the Dagster instance at {left.home} "
          "(tracelake ui shows them; --no-record skips this)", flush=True)
    if left.dropped:
        print(f"WARNING the outbox {left.folder} keeps the {MAX_RECORDS} newest records: dropped the "
              f"{len(left.dropped)} oldest (runs {', '.join(left.dropped[:10])}{' …' if len(left.dropped) > 10 else ''}), "
              "which tracelake ui will not show; the lake keeps them", flush=True)


_Item = tuple[RunSource, str]  # a run and its position ("3/10")


def _pool(target: _Target, items: list[_Item], width: int, outcomes: dict[str, RunOutcome]) -> list[_Item]:
    """Ingest ``items`` in ``width`` worker processes into ``outcomes``; returns those that did not finish because a
    worker died (which fails every run the pool had not finished)."""
    spawn = multiprocessing.get_context("spawn")  # a fork would copy DuckDB's threads' locks
    unfinished = []
    with ProcessPoolExecutor(width, mp_context=spawn) as pool:
        futures = {pool.submit(_ingest_one, target, *item): item for item in items}
        for future, item in futures.items():
            try:
                outcomes[item[0].run_id] = future.result()
            except BrokenProcessPool:
                unfinished.append(item)
    return unfinished


def _in_workers(target: _Target, items: list[_Item], jobs: int) -> dict[str, RunOutcome]:
    """Each run in a worker process, ``jobs`` at a time. After a worker dies, each run not finished is ingested
    again alone, so that only a run that kills its worker again is lost, and said to be."""
    outcomes: dict[str, RunOutcome] = {}
    for run, position in _pool(target, items, jobs, outcomes):
        if _pool(target, [(run, position)], 1, outcomes):
            print(f"ERROR run {run.run_id}: its worker process died while ingesting it (a crash, or the OOM "
                  "killer); nothing of this ingest of it landed", flush=True)
            outcomes[run.run_id] = RunOutcome(run.run_id, None, 1)
    return outcomes


def ingest(
    source_url: str,
    lake_url: str,
    *,
    storage_options: dict[str, Any] | None = None,
    catalog: str | None = None,
    jobs: int = 1,
    settings: IngestSettings | None = None,
    record: bool = True,
) -> int:
    """Ingest every run under ``source_url`` into ``lake_url`` and record them in the Dagster instance (``record``);
    returns the exit code: 0 when every trace landed whole, 1 when any trace or run had an error (good traces still
    land)."""
    started = time.perf_counter()
    runs = discover_runs(source_url, storage_options)
    if not runs:
        print(f"WARNING no trace files (*.json, *.json.gz) under {source_url}: nothing ingested", flush=True)
        return 1
    traces = sum(len(r.traces) for r in runs)
    print(f"found {plural(traces, 'trace file')} in {plural(len(runs), 'run')} under {source_url}", flush=True)
    lake = Lake(lake_url, storage_options, catalog)
    lake.check_layout()  # fails here, once, on a lake that cannot be written
    for leftover in sweep_dead_scratch():
        print(f"removed {leftover}, left by an ingest that was killed", flush=True)
    bars = sys.stdout.isatty() and (len(runs) == 1 or jobs <= 1)  # workers' bars would draw over one another
    target = _Target(lake.url, catalog, storage_options, settings or IngestSettings(), bars)
    items = [(run, f"{index}/{len(runs)}") for index, run in enumerate(runs, start=1)]
    if len(runs) == 1:
        outcomes = {runs[0].run_id: _ingest_one(target, *items[0])}
    else:
        outcomes = _in_workers(target, items, max(1, jobs))
    landed = [o.ingested for o in outcomes.values() if o.ingested is not None]
    failed = len(landed) < len(runs) or any(o.errors for o in outcomes.values())
    count = plural(len(runs), "run") if len(landed) == len(runs) else f"{len(landed)} of {plural(len(runs), 'run')}"
    print(f"ingested {count} into {lake_url} in {time.perf_counter() - started:.1f} s: "
          f"{'with errors' if failed else 'ok'}", flush=True)
    if record and landed:
        _record(lake, landed)
    fleet = write_fleet_view(lake)
    print(f"reports: {fleet} (the fleet view; each run's report beside it, <run_id>.html)", flush=True)
    return 1 if failed else 0
