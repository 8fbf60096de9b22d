"""``tracelake ingest``: materialize the Dagster assets of every run under a source, in-process.

The first run's first trace starts parsing before Dagster is imported (:mod:`pipelines.head_start`): the import,
the instance and the run's start are ~1.5 s of Python on one core, which the parse's second core fills.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import orjson

from pipelines.cores import core_share
from pipelines.head_start import discard_parses_ahead, parse_ahead
from pipelines.lake import Lake
from pipelines.parse import ParseSettings
from pipelines.scratch import sweep_dead_scratch
from pipelines.sources import discover_runs
from pipelines.storage import OPTIONS_VARIABLE
from tracelake.startup import heavy_imports, start_worker
from transforms.report_files import write_fleet_view
from transforms.svg_renderer import start_helper
from transforms.units import plural


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
    parallelism = max(parallelism, jobs)
    in_workers = jobs > 1 and len(runs) > 1
    if not in_workers and runs[0].traces:  # with the settings the run's parse step will have (IngestSettingsResource)
        parse_ahead(runs[0].traces[0], storage_options, ParseSettings(threads=core_share(parallelism)))
    try:
        with heavy_imports():
            from tracelake.dagster_runs import Target, materialize_run
        target = Target(source_url, lake.url, catalog or "", parallelism=parallelism)
        positions = [f"{index}/{len(runs)}" for index in range(1, len(runs) + 1)]
        if in_workers:
            spawn = multiprocessing.get_context("spawn")  # a fork would copy DuckDB's and Dagster's threads' locks
            with ProcessPoolExecutor(min(jobs, len(runs)), mp_context=spawn, initializer=start_worker) as pool:
                outcomes = list(pool.map(materialize_run, [target] * len(runs), runs, positions))
        else:
            outcomes = [materialize_run(target, run, position) for run, position in zip(runs, positions, strict=True)]
    finally:
        discard_parses_ahead()
        gc.unfreeze()  # what heavy_imports froze, for callers that go on
    failed = any(not success or errors for success, errors in outcomes)
    print(f"ingested {plural(len(runs), 'run')} into {lake_url}: {'with errors' if failed else 'ok'}", flush=True)
    fleet = write_fleet_view(lake)
    print(f"reports: {fleet} (the fleet view; each run's report beside it, <run_id>.html)", flush=True)
    return 1 if failed else 0
