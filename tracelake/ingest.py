"""``tracelake ingest``: materialize the Dagster assets of every run under a source, in-process."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import dagster as dg
import orjson

from dagster_project.assets.marts import marts
from dagster_project.assets.raw import raw_tables
from dagster_project.assets.report import report
from dagster_project.partitions import trace_runs
from dagster_project.progress import progress_log
from dagster_project.resources import IngestSettingsResource, LakeResource, TraceSourceResource
from pipelines.sources import discover_runs
from pipelines.storage import redact


class _ErrorCounter(logging.Handler):
    """Prints progress lines to stdout and counts the error lines among them."""

    def __init__(self) -> None:
        super().__init__()
        self.errors = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.errors += 1
        print(redact(record.getMessage()), file=sys.stdout, flush=True)


def instance() -> dg.DagsterInstance:
    """The persistent instance under DAGSTER_HOME when set (so the UI shows the runs), else an ephemeral one."""
    return dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else dg.DagsterInstance.ephemeral()


def ingest(
    source_url: str, lake_url: str, *, storage_options: dict[str, Any] | None = None, parallelism: int = 0
) -> int:
    """Ingest every run under ``source_url`` into ``lake_url``; returns the process exit code.

    0 when every trace landed whole; 1 when any trace or run had an error (good traces still land).
    """
    counter = _ErrorCounter()
    progress_log.addHandler(counter)
    progress_log.setLevel(logging.INFO)
    progress_log.propagate = False
    try:
        runs = discover_runs(source_url, storage_options)
        total = sum(len(r.traces) for r in runs)
        print(f"found {total} trace files in {len(runs)} runs under {source_url}")
        options_json = orjson.dumps(storage_options).decode() if storage_options else ""
        resources = {
            "source": TraceSourceResource(url=source_url, storage_options_json=options_json),
            "lake": LakeResource(url=lake_url, storage_options_json=options_json),
            "ingest_settings": IngestSettingsResource(parallelism=parallelism),
        }
        dagster = instance()
        known = set(dagster.get_dynamic_partitions(trace_runs.name))
        dagster.add_dynamic_partitions(trace_runs.name, [r.run_id for r in runs if r.run_id not in known])
        failed_runs = 0
        for index, run in enumerate(runs, 1):
            print(f"[{index}/{len(runs)}] run {run.run_id}: {len(run.traces)} traces")
            result = dg.materialize(
                [raw_tables, marts, report],
                partition_key=run.run_id,
                instance=dagster,
                resources=resources,
                run_config={
                    "ops": {"raw_tables": {"config": {"run_url": run.url}}},
                    "loggers": {"console": {"config": {"log_level": "ERROR"}}},
                },
                raise_on_error=False,
                tags={"tracelake/source": run.url},
            )
            if not result.success:
                failed_runs += 1
                for event in result.all_events:
                    if event.is_step_failure and event.step_failure_data.error:
                        print(f"ERROR run {run.run_id}: {redact(event.step_failure_data.error.message.strip())}")
            for evaluation in result.get_asset_check_evaluations():
                if not evaluation.passed:
                    print(f"WARNING run {run.run_id}: check {evaluation.asset_key.to_user_string()}:{evaluation.check_name} failed")
        status = "with errors" if counter.errors or failed_runs else "ok"
        print(f"ingested {len(runs)} runs into {lake_url}: {status}")
        return 1 if counter.errors or failed_runs else 0
    finally:
        progress_log.removeHandler(counter)
