"""The fleet code location, ``dagster_project.fleet:defs``: the assets, job, sensor and schedule of
``dagster_project.definitions``, with each step run by a Celery worker and the steps' small outputs (trace
summaries, versions) kept in the object store, since workers share nothing but the servers.

Environment: ``TRACELAKE_CELERY_BROKER`` and ``TRACELAKE_CELERY_BACKEND`` (e.g. ``redis://redis:6379/0`` and
``/1``), ``TRACELAKE_STEP_IO`` (``s3://bucket/prefix`` for step outputs), plus the variables of
``dagster_project.resources``. S3 endpoint and credentials come from the standard AWS variables.
"""

from __future__ import annotations

import dagster as dg
from dagster_aws.s3 import S3PickleIOManager, S3Resource
from dagster_celery import celery_executor

from dagster_project import definitions as single_machine  # a module: one Definitions object at module scope
from pipelines.settings import CELERY_BACKEND, CELERY_BROKER, STEP_IO


def step_io_manager(url: str) -> S3PickleIOManager:
    """Step outputs pickled under ``url`` (``s3://bucket/prefix``), readable from every worker."""
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    if not url.startswith("s3://") or not bucket:
        raise ValueError(f"TRACELAKE_STEP_IO must be s3://bucket[/prefix], got {url!r}")
    return S3PickleIOManager(s3_resource=S3Resource(), s3_bucket=bucket, s3_prefix=prefix.strip("/") or "dagster")


executor = celery_executor.configured(
    {"broker": {"env": CELERY_BROKER.name}, "backend": {"env": CELERY_BACKEND.name}},
    name="tracelake_celery",
)

defs = dg.Definitions.merge(
    single_machine.defs,
    dg.Definitions(
        resources={"io_manager": step_io_manager(STEP_IO.value() or "")},
        executor=executor,
    ),
)
