"""The ingest job as a reconstructable target for multiprocess tests, with one trace made to fail.

Each step process rebuilds the job through :func:`ingest_job`, which injects the failure there: the parse
step of a trace named ``FAILING`` raises inside the parser, as a vanished file or a parser bug would.
"""

from __future__ import annotations

import sys

import dagster as dg

import pipelines.staging.trace
from dagster_project.assets.raw import raw_tables
from dagster_project.definitions import defs

FAILING = "boom"
_parse_trace = pipelines.staging.trace.parse_trace


def _failing_parse_trace(fs, path, trace, **kwargs):
    if trace.trace_id == FAILING:
        raise OSError(f"injected read failure of {path}")
    return _parse_trace(fs, path, trace, **kwargs)


def ingest_job() -> dg.JobDefinition:
    """The code location's ``ingest_run`` job, with the failure injected (called in each step process)."""
    pipelines.staging.trace.parse_trace = _failing_parse_trace
    return defs.resolve_job_def("ingest_run")


def main(run_id: str, run_url: str) -> int:
    """Materialize the raw tables of one run with the multiprocess executor; 0 on success."""
    with dg.DagsterInstance.get() as instance:
        result = dg.execute_job(
            dg.reconstructable(ingest_job),
            instance=instance,
            run_config={
                "ops": {"raw_tables": {"config": {"run_url": run_url}}},
                "execution": {"config": {"multiprocess": {"max_concurrent": 2}}},
            },
            tags={"dagster/partition": run_id},
            asset_selection=list(raw_tables.keys),
        )
        print(result.run_id)
        return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
