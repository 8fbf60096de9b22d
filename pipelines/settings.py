"""Every setting tracelake reads from the environment, in one place: its variable, its default and its meaning.

Read when asked (``CATALOG.value()``), not at import, so that a process sets a variable before any use and tests can
set them per test. Dagster's resources name the same variables (``dagster_project.resources``); the command line's
options win over them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    """One environment variable tracelake reads."""

    name: str
    default: str | None
    meaning: str

    def value(self) -> str | None:
        """The variable's value, or its default where it is unset or empty."""
        return os.environ.get(self.name) or self.default

    def text(self) -> str:
        """The value, which a variable with a default always has; an unset one without raises LookupError naming
        it."""
        value = self.value()
        if value is None:
            raise LookupError(f"{self.name} is not set: {self.meaning}")
        return value

    def number(self) -> float:
        """The value as a number; a value that is not one raises ValueError naming the variable."""
        text = self.text()
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{self.name}={text!r} is not a number ({self.meaning})") from None

    def is_set(self) -> bool:
        """Whether the environment sets it (to anything but the empty string)."""
        return bool(os.environ.get(self.name))


SOURCE = Variable("TRACELAKE_SOURCE", None, "the folder or URL the Dagster sensor and schedule watch for runs")
LAKE = Variable("TRACELAKE_LAKE", None, "the lake Dagster's assets write (a folder or s3:// URL)")
CATALOG = Variable("TRACELAKE_CATALOG", None,
                   "the lake's DuckLake catalog: postgresql://user@host:port/db or a file (default LAKE/catalog.sqlite)")
STORAGE_OPTIONS = Variable("TRACELAKE_STORAGE_OPTIONS", None,
                           "fsspec options as JSON (credentials included), kept out of Dagster's run config")
HTTP_TIMEOUT_S = Variable("TRACELAKE_HTTP_TIMEOUT_S", "30", "connect and read timeout of object-store requests, s")
RETENTION = Variable("TRACELAKE_RETENTION", "1 hour",
                     "how long a replaced version stays readable, by queries that started on it and as of its "
                     "snapshot (a DuckDB interval); its files leave the tables' folders at once")
MEMORY_LIMIT = Variable("TRACELAKE_MEMORY_LIMIT", "1.5GB",
                        "peak memory of ingesting one run, whatever its traces' size: the parse, the analysis tables "
                        "and the commit share it, and spill to disk beyond it (pipelines/memory.py)")
SQL_MEMORY_LIMIT = Variable("TRACELAKE_SQL_MEMORY_LIMIT", "4GB", "memory bound of one `tracelake sql` query")
SQL_CATALOG = Variable("TRACELAKE_SQL_CATALOG", None,
                       "the catalog `tracelake sql` reads a PostgreSQL lake through: a role that may only SELECT "
                       "(deploy/postgres-reader.sql); default the lake's catalog")
SQL_TIME_LIMIT_S = Variable("TRACELAKE_SQL_TIME_LIMIT_S", "600", "time bound of one `tracelake sql` query, s")
SENSOR_INTERVAL_S = Variable("TRACELAKE_SENSOR_INTERVAL_S", "30", "seconds between the sensor's looks at SOURCE")
FULL_PASS_EVERY = Variable("TRACELAKE_FULL_PASS_EVERY", "10",
                           "on object stores, every n-th sensor tick lists everything (rewrites); others list new keys")
SETTLE_S = Variable("TRACELAKE_SETTLE_S", "60",
                    "local folders: a run with a file written in the last n seconds waits for a later tick")
SCHEDULE_CRON = Variable("TRACELAKE_SCHEDULE_CRON", "*/15 * * * *", "when the schedule (the sensor's stand-in) runs")
MAINTAIN_CRON = Variable("TRACELAKE_MAINTAIN_CRON", "0 3 * * *", "when the lake's maintenance job runs")
STEP_IO = Variable("TRACELAKE_STEP_IO", None, "the fleet's s3://bucket/prefix for Dagster's step outputs")
CELERY_BROKER = Variable("TRACELAKE_CELERY_BROKER", None, "the fleet's Celery broker (redis://host:6379/0)")
CELERY_BACKEND = Variable("TRACELAKE_CELERY_BACKEND", None, "the fleet's Celery result backend (redis://host:6379/1)")
RUN_ID = Variable("TRACELAKE_RUN_ID", None, "the run folder a training job's trace_handler writes into")

VARIABLES = (SOURCE, LAKE, CATALOG, STORAGE_OPTIONS, HTTP_TIMEOUT_S, RETENTION, MEMORY_LIMIT, SQL_MEMORY_LIMIT,
             SQL_CATALOG, SQL_TIME_LIMIT_S, SENSOR_INTERVAL_S, FULL_PASS_EVERY, SETTLE_S, SCHEDULE_CRON, MAINTAIN_CRON,
             STEP_IO, CELERY_BROKER, CELERY_BACKEND, RUN_ID)
"""Every variable, for the README's table and ``tracelake`` help."""
