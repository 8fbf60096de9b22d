"""``tracelake ingest``: materialize the Dagster assets of every run under a source, in-process."""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import dagster as dg
import orjson

from dagster_project.assets.marts import marts
from dagster_project.assets.raw import raw_tables
from dagster_project.assets.report import report
from dagster_project.partitions import trace_runs
from dagster_project.progress import progress_log
from dagster_project.resources import OPTIONS_VARIABLE, IngestSettingsResource, LakeResource, TraceSourceResource
from pipelines.lake import Lake
from pipelines.scratch import sweep_dead_scratch
from pipelines.sources import RunSource, discover_runs
from pipelines.storage import redact
from tracelake.home import dagster_home, opening_instance, skip_history_fsync
from tracelake.startup import start_worker
from transforms.report_files import write_fleet_view
from transforms.svg_renderer import start_helper
from transforms.docs import first_sentence
from transforms.units import plural


class _ErrorCounter(logging.Handler):
    """Prints progress lines to stdout and counts the error lines among them."""

    def __init__(self) -> None:
        super().__init__()
        self.errors = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.errors += 1
        print(redact(record.getMessage()), file=sys.stdout, flush=True)


@functools.cache
def instance() -> dg.DagsterInstance:
    """The persistent instance under DAGSTER_HOME, by default ``~/.tracelake/dagster`` (so ``tracelake ui`` shows
    the runs). One per process: creating it costs ~0.5 s."""
    home = dagster_home()
    skip_history_fsync(home)
    with opening_instance(home):
        return dg.DagsterInstance.get()


@dataclass(frozen=True)
class _Target:
    """Where runs come from and go to, in a form that crosses to worker processes."""

    source_url: str
    lake_url: str
    catalog: str
    parallelism: int

    def resources(self) -> dict[str, dg.ConfigurableResource]:
        # Storage options may hold secrets: they reach the resources through the environment, never as config
        # values, which Dagster stores with the run.
        options = dg.EnvVar(OPTIONS_VARIABLE) if os.environ.get(OPTIONS_VARIABLE) else ""
        return {
            "source": TraceSourceResource(url=self.source_url, storage_options_json=options),
            "lake": LakeResource(url=self.lake_url, storage_options_json=options, catalog=self.catalog),
            "ingest_settings": IngestSettingsResource(parallelism=self.parallelism),
        }


def _ingest_run(target: _Target, run: RunSource, position: str) -> tuple[bool, int]:
    """Materialize every asset of one run; returns whether it succeeded and how many error lines it printed."""
    counter = _ErrorCounter()
    progress_log.addHandler(counter)
    progress_log.setLevel(logging.INFO)
    progress_log.propagate = False
    try:
        print(f"[{position}] run {run.run_id}: {plural(len(run.traces), 'trace')}", flush=True)
        dagster = instance()
        dagster.add_dynamic_partitions(trace_runs.name, [run.run_id])  # adds only partitions not there yet
        result = dg.materialize(
            [raw_tables, marts, report],
            partition_key=run.run_id,
            instance=dagster,
            resources=target.resources(),
            run_config={
                "ops": {"raw_tables": {"config": {"run_url": run.url}}},
                "loggers": {"console": {"config": {"log_level": "ERROR"}}},
            },
            raise_on_error=False,
            tags={"tracelake/source": run.url},
        )
        if not result.success:
            for event in result.all_events:
                if event.is_step_failure and event.step_failure_data.error:
                    print(f"ERROR run {run.run_id}: {redact(event.step_failure_data.error.message.strip())}", flush=True)
        for evaluation in result.get_asset_check_evaluations():
            if not evaluation.passed:
                check = f"{evaluation.asset_key.to_user_string()}:{evaluation.check_name}"
                print(f"WARNING run {run.run_id}: check {check} failed: {_why(evaluation)}", flush=True)
        return result.success, counter.errors
    finally:
        progress_log.removeHandler(counter)


def _why(evaluation: dg.AssetCheckEvaluation) -> str:
    """What the check looks for, how many rows broke it and the first of them (the check's own columns)."""
    metadata = evaluation.metadata
    failing = metadata["failing_rows"].value if "failing_rows" in metadata else None
    sample = metadata["sample"].value if "sample" in metadata else ""
    count = plural(failing, "failing row") if isinstance(failing, int) else "failing rows"
    return f"{first_sentence(evaluation.description or '')} [{count}; first: {sample}]"


def ingest(
    source_url: str,
    lake_url: str,
    *,
    storage_options: dict[str, Any] | None = None,
    catalog: str | None = None,
    parallelism: int = 0,
    jobs: int = 1,
) -> int:
    """Ingest every run under ``source_url`` into ``lake_url``; returns the process exit code.

    With ``jobs`` above 1, that many runs are ingested at once, each in a worker process of its
    own; each run's parse then gets its share of the cores (on two cores it no longer pays: README).
    0 when every trace landed whole; 1 when any trace or run had an error (good traces still land).
    """
    start_helper()  # the charts' engine boots while a core is idle (transforms.svg_renderer)
    runs = discover_runs(source_url, storage_options)
    traces = sum(len(r.traces) for r in runs)
    if not runs:
        print(f"WARNING no trace files (*.json, *.json.gz) under {source_url}: nothing ingested", flush=True)
        return 1
    print(f"found {plural(traces, 'trace file')} in {plural(len(runs), 'run')} under {source_url}", flush=True)
    if storage_options:
        os.environ[OPTIONS_VARIABLE] = orjson.dumps(storage_options).decode()  # inherited by --jobs workers
    lake = Lake(lake_url, storage_options, catalog)  # fails here, once, on a lake that cannot be opened
    lake.check_layout()
    for leftover in sweep_dead_scratch():
        print(f"removed {leftover}, left by an ingest that was killed", flush=True)
    target = _Target(source_url, lake.url, catalog or "", parallelism=max(parallelism, jobs))
    positions = [f"{index}/{len(runs)}" for index in range(1, len(runs) + 1)]
    if jobs > 1 and len(runs) > 1:
        spawn = multiprocessing.get_context("spawn")  # a fork would copy DuckDB's and Dagster's threads' locks
        with ProcessPoolExecutor(min(jobs, len(runs)), mp_context=spawn, initializer=start_worker) as pool:
            outcomes = list(pool.map(_ingest_run, [target] * len(runs), runs, positions))
    else:
        outcomes = [_ingest_run(target, run, position) for run, position in zip(runs, positions, strict=True)]
    failed = any(not success or errors for success, errors in outcomes)
    print(f"ingested {plural(len(runs), 'run')} into {lake_url}: {'with errors' if failed else 'ok'}", flush=True)
    fleet = write_fleet_view(lake)
    print(f"reports: {fleet} (the fleet view; each run's report beside it, <run_id>.html)", flush=True)
    return 1 if failed else 0
