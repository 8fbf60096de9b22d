"""Where traces come from and where the lake is; values come from environment variables
(:mod:`pipelines.settings`)."""

from __future__ import annotations

from typing import Any

import dagster as dg
import orjson

from pipelines.cores import core_share
from pipelines.lake.lake import Lake
from pipelines.parse import ParseSettings
from pipelines.settings import (
    CATALOG,
    FULL_PASS_EVERY,
    LAKE,
    MEMORY_LIMIT,
    SETTLE_S,
    SOURCE,
    STORAGE_OPTIONS,
    Variable,
)
from transforms.composition.steps import BuildSettings


def _options(storage_options_json: str) -> dict[str, Any] | None:
    return orjson.loads(storage_options_json) if storage_options_json else None


class TraceSourceResource(dg.ConfigurableResource):  # type: ignore[type-arg]  # Dagster's generic is its own value
    """The folder or bucket prefix holding one folder of trace files per run."""

    url: str
    storage_options_json: str = ""
    full_pass_every: int = int(FULL_PASS_EVERY.default or 10)
    """On S3, every n-th sensor tick lists everything (rewrites); the others list only new keys."""
    settle_seconds: int = int(SETTLE_S.default or 60)
    """Local folders: a run with a file written in the last n seconds waits for a later tick (files are written in
    place); object stores only ever show whole uploads."""

    def options(self) -> dict[str, Any] | None:
        """Explicit fsspec options; credentials otherwise come from the standard AWS variables."""
        return _options(self.storage_options_json)


class LakeResource(dg.ConfigurableResource):  # type: ignore[type-arg]  # Dagster's generic is its own value
    """The lake: its data (a local path or ``s3://`` URL) and its DuckLake catalog."""

    url: str
    storage_options_json: str = ""
    catalog: str = ""
    """``postgresql://user@host:port/db`` or a file path; default ``LAKE/catalog.sqlite`` for local lakes."""

    def lake(self) -> Lake:
        """The lake handle used by pipelines/ and transforms/."""
        return Lake(self.url, _options(self.storage_options_json), self.catalog or None)


class IngestSettingsResource(dg.ConfigurableResource):  # type: ignore[type-arg]  # Dagster's generic is its own value
    """Bounds for each parse step (chunk size, DuckDB memory budget, how many steps share the machine's cores) and
    for the marts step's DuckDB."""

    chunk_mb: int = ParseSettings.chunk_bytes >> 20
    max_event_mb: int = ParseSettings.max_event_bytes >> 20
    """An event larger than this is skipped and reported (``oversized_event``), never held whole."""
    memory_limit: str = ParseSettings.memory_limit
    marts_memory_limit: str = ""
    """DuckDB's buffer for the analysis tables (default ``TRACELAKE_MEMORY_LIMIT``, else 400MB)."""
    parallelism: int = 0
    """Steps running at once on one machine (the executor's ``max_concurrent``; 0: one); each gets cores / parallelism threads."""

    def build(self) -> BuildSettings:
        """The settings of the step that builds a run's analysis tables: as a parse step, its share of the cores."""
        limit = self.marts_memory_limit or MEMORY_LIMIT.value()
        return BuildSettings(threads=core_share(self.parallelism), **({"memory_limit": limit} if limit else {}))

    def parse_settings(self) -> ParseSettings:
        """The pipelines-level settings of one parse step."""
        return ParseSettings(chunk_bytes=self.chunk_mb << 20, max_event_bytes=self.max_event_mb << 20,
                             memory_limit=self.memory_limit, threads=core_share(self.parallelism))


def _from_env(variable: Variable) -> dg.EnvVar | str:
    """``variable``, read when a run starts where it is set (so a secret never lands in a run's config); else empty,
    the field's own default."""
    return dg.EnvVar(variable.name) if variable.is_set() else ""


def default_resources() -> dict[str, dg.ConfigurableResource]:  # type: ignore[type-arg]
    """Resources bound to the variables of :mod:`pipelines.settings`."""
    source_ints = {field: dg.EnvVar.int(variable.name)
                   for field, variable in (("full_pass_every", FULL_PASS_EVERY), ("settle_seconds", SETTLE_S))
                   if variable.is_set()}
    return {
        "source": TraceSourceResource(url=dg.EnvVar(SOURCE.name), storage_options_json=_from_env(STORAGE_OPTIONS),
                                      **source_ints),
        "lake": LakeResource(url=dg.EnvVar(LAKE.name), storage_options_json=_from_env(STORAGE_OPTIONS),
                             catalog=_from_env(CATALOG)),
        "ingest_settings": IngestSettingsResource(),
    }
