"""Where traces come from and where the lake is; values come from environment variables."""

from __future__ import annotations

import os
from typing import Any

import dagster as dg
import orjson

from pipelines.cores import core_share
from pipelines.lake import Lake
from pipelines.parse import ParseSettings
from pipelines.storage import OPTIONS_VARIABLE
from transforms.pipeline import MartSettings
from transforms.runner import MARTS_MEMORY_LIMIT


def _options(storage_options_json: str) -> dict[str, Any] | None:
    return orjson.loads(storage_options_json) if storage_options_json else None


class TraceSourceResource(dg.ConfigurableResource):
    """The folder or bucket prefix holding one folder of trace files per run."""

    url: str
    storage_options_json: str = ""
    full_pass_every: int = 10
    """On S3, every n-th sensor tick lists everything (rewrites); the others list only new keys."""
    settle_seconds: int = 60
    """Local folders: a run with a file written in the last n seconds waits for a later tick (files are written in
    place); object stores only ever show whole uploads."""

    def options(self) -> dict[str, Any] | None:
        """Explicit fsspec options; credentials otherwise come from the standard AWS variables."""
        return _options(self.storage_options_json)


class LakeResource(dg.ConfigurableResource):
    """The lake: its data (a local path or ``s3://`` URL) and its DuckLake catalog."""

    url: str
    storage_options_json: str = ""
    catalog: str = ""
    """``postgresql://user@host:port/db`` or a file path; default ``LAKE/catalog.sqlite`` for local lakes."""

    def lake(self) -> Lake:
        """The lake handle used by pipelines/ and transforms/."""
        return Lake(self.url, _options(self.storage_options_json), self.catalog or None)


class IngestSettingsResource(dg.ConfigurableResource):
    """Bounds for each parse step (chunk size, DuckDB memory budget, how many steps share the machine's cores) and
    for the marts step's DuckDB."""

    chunk_mb: int = ParseSettings.chunk_bytes >> 20
    max_event_mb: int = ParseSettings.max_event_bytes >> 20
    """An event larger than this is skipped and reported (``oversized_event``), never held whole."""
    memory_limit: str = ParseSettings.memory_limit
    marts_memory_limit: str = MARTS_MEMORY_LIMIT
    parallelism: int = 0
    """Parse steps running at once on one machine (the executor's ``max_concurrent``; 0: one); each gets cores / parallelism threads."""
    report_ahead: bool = False
    """Start the run's report once the marts commit, for the report step to take over: only where that step runs in
    the same process (``tracelake ingest``'s in-process runs; see :func:`transforms.report_files.start_run_report`)."""

    def mart_settings(self) -> MartSettings:
        """The settings of the step that builds and commits the marts: as a parse step, its share of the cores."""
        return MartSettings(memory_limit=self.marts_memory_limit, threads=self._threads())

    def _threads(self) -> int:
        return core_share(self.parallelism)

    def parse_settings(self) -> ParseSettings:
        """The pipelines-level settings of one parse step."""
        return ParseSettings(chunk_bytes=self.chunk_mb << 20, max_event_bytes=self.max_event_mb << 20,
                             memory_limit=self.memory_limit, threads=self._threads())


def default_resources() -> dict[str, dg.ConfigurableResource]:
    """Resources bound to TRACELAKE_SOURCE, TRACELAKE_LAKE, TRACELAKE_STORAGE_OPTIONS, TRACELAKE_CATALOG,
    TRACELAKE_FULL_PASS_EVERY and TRACELAKE_SETTLE_S."""
    options = dg.EnvVar(OPTIONS_VARIABLE) if OPTIONS_VARIABLE in os.environ else ""
    # set only where the variable is, so that an unset one leaves the field's own default
    source_ints = {
        field: dg.EnvVar.int(variable)
        for field, variable in (("full_pass_every", "TRACELAKE_FULL_PASS_EVERY"), ("settle_seconds", "TRACELAKE_SETTLE_S"))
        if variable in os.environ
    }
    return {
        "source": TraceSourceResource(url=dg.EnvVar("TRACELAKE_SOURCE"), storage_options_json=options, **source_ints),
        "lake": LakeResource(
            url=dg.EnvVar("TRACELAKE_LAKE"),
            storage_options_json=options,
            catalog=dg.EnvVar("TRACELAKE_CATALOG") if "TRACELAKE_CATALOG" in os.environ else "",
        ),
        "ingest_settings": IngestSettingsResource(),
    }
