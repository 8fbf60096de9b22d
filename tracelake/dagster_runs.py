"""One run's assets materialized by Dagster in this process, recorded in the persistent instance that ``tracelake
ui`` shows: the heavy half of ``tracelake ingest`` (Dagster's import and instance), which :mod:`tracelake.ingest`
loads only once the first run's parse has started."""

from __future__ import annotations

import functools
import logging
import os
import sys
from dataclasses import dataclass

import dagster as dg

from dagster_project.assets.marts import marts
from dagster_project.assets.raw import raw_tables
from dagster_project.assets.report import report
from dagster_project.partitions import trace_runs
from dagster_project.progress import progress_log
from dagster_project.resources import IngestSettingsResource, LakeResource, TraceSourceResource
from pipelines.sources import RunSource
from pipelines.storage import OPTIONS_VARIABLE, redact
from tracelake.home import dagster_home, opening_instance, skip_history_fsync
from transforms.docs import first_sentence
from transforms.report_files import finish_reports_ahead
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
class Target:
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
            "ingest_settings": IngestSettingsResource(parallelism=self.parallelism, report_ahead=True),
        }


def materialize_run(target: Target, run: RunSource, position: str) -> tuple[bool, int]:
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
        finish_reports_ahead()
        progress_log.removeHandler(counter)


def _why(evaluation: dg.AssetCheckEvaluation) -> str:
    """What the check looks for, how many rows broke it and the first of them (the check's own columns)."""
    metadata = evaluation.metadata
    failing = metadata["failing_rows"].value if "failing_rows" in metadata else None
    sample = metadata["sample"].value if "sample" in metadata else ""
    count = plural(failing, "failing row") if isinstance(failing, int) else "failing rows"
    return f"{first_sentence(evaluation.description or '')} [{count}; first: {sample}]"
