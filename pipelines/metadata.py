"""Rows of the tables that come from a trace's top-level keys rather than its events."""

from __future__ import annotations

from typing import Any

import orjson

_HEAD = {"run_id": "VARCHAR", "trace_id": "VARCHAR", "rank": "BIGINT"}

# deviceProperties key → (column, type); ROCm spells shared memory per SM differently.
_DEVICE_FIELDS: dict[str, tuple[str, str]] = {
    "id": ("device", "BIGINT"),
    "name": ("device_name", "VARCHAR"),
    "totalGlobalMem": ("total_global_mem_bytes", "BIGINT"),
    "computeMajor": ("compute_major", "BIGINT"),
    "computeMinor": ("compute_minor", "BIGINT"),
    "numSms": ("num_sms", "BIGINT"),
    "maxThreadsPerBlock": ("max_threads_per_block", "BIGINT"),
    "maxThreadsPerMultiprocessor": ("max_threads_per_sm", "BIGINT"),
    "regsPerBlock": ("regs_per_block", "BIGINT"),
    "regsPerMultiprocessor": ("regs_per_sm", "BIGINT"),
    "warpSize": ("warp_size", "BIGINT"),
    "sharedMemPerBlock": ("shared_mem_per_block_bytes", "BIGINT"),
    "sharedMemPerMultiprocessor": ("shared_mem_per_sm_bytes", "BIGINT"),
    "maxSharedMemoryPerMultiProcessor": ("shared_mem_per_sm_bytes", "BIGINT"),
    "sharedMemPerBlockOptin": ("shared_mem_per_block_optin_bytes", "BIGINT"),
}
DEVICES_COLUMNS = {**_HEAD, **dict(_DEVICE_FIELDS.values())}
PROCESS_GROUPS_COLUMNS = {
    **_HEAD,
    "process_group_name": "VARCHAR",
    "process_group_desc": "VARCHAR",
    "backend_config": "VARCHAR",
    "group_size": "BIGINT",
    "ranks": "BIGINT[]",
}
TRACE_METADATA_COLUMNS = {**_HEAD, "key": "VARCHAR", "value_json": "VARCHAR"}


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def device_rows(metadata: dict[str, Any]) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """One row per entry of ``deviceProperties``."""
    rows = []
    for props in metadata.get("deviceProperties") or []:
        if not isinstance(props, dict):
            continue
        row: dict[str, Any] = {}
        for key, (column, kind) in _DEVICE_FIELDS.items():
            if key in props:
                row[column] = props[key] if kind == "VARCHAR" else _int_or_none(props[key])
        rows.append(row)
    return DEVICES_COLUMNS, rows


def process_group_rows(metadata: dict[str, Any]) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """One row per process group in ``distributedInfo.pg_config``."""
    info = metadata.get("distributedInfo")
    groups = info.get("pg_config") if isinstance(info, dict) else None
    rows = [
        {
            "process_group_name": str(pg.get("pg_name")),
            "process_group_desc": pg.get("pg_desc"),
            "backend_config": pg.get("backend_config"),
            "group_size": _int_or_none(pg.get("pg_size")),
            "ranks": [r for r in pg.get("ranks") or [] if isinstance(r, int)],
        }
        for pg in groups or []
        if isinstance(pg, dict)
    ]
    return PROCESS_GROUPS_COLUMNS, rows


def metadata_rows(metadata: dict[str, Any]) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Every other top-level key (environment metadata, profiler logs), value as JSON text."""
    skip = {"deviceProperties", "traceEvents"}
    rows = [
        {"key": key, "value_json": orjson.dumps(value).decode()}
        for key, value in metadata.items()
        if key not in skip
    ]
    return TRACE_METADATA_COLUMNS, rows
