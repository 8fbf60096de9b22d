"""Rows of the tables that come from a trace's top-level keys rather than its events."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

_HEAD = [("trace_id", pa.string()), ("rank", pa.int64())]

# deviceProperties key → (column, type); ROCm spells shared memory per SM differently.
_DEVICE_FIELDS: dict[str, tuple[str, pa.DataType]] = {
    "id": ("device", pa.int64()),
    "name": ("device_name", pa.string()),
    "totalGlobalMem": ("total_global_mem_bytes", pa.int64()),
    "computeMajor": ("compute_major", pa.int64()),
    "computeMinor": ("compute_minor", pa.int64()),
    "numSms": ("num_sms", pa.int64()),
    "maxThreadsPerBlock": ("max_threads_per_block", pa.int64()),
    "maxThreadsPerMultiprocessor": ("max_threads_per_sm", pa.int64()),
    "regsPerBlock": ("regs_per_block", pa.int64()),
    "regsPerMultiprocessor": ("regs_per_sm", pa.int64()),
    "warpSize": ("warp_size", pa.int64()),
    "sharedMemPerBlock": ("shared_mem_per_block_bytes", pa.int64()),
    "sharedMemPerMultiprocessor": ("shared_mem_per_sm_bytes", pa.int64()),
    "maxSharedMemoryPerMultiProcessor": ("shared_mem_per_sm_bytes", pa.int64()),
    "sharedMemPerBlockOptin": ("shared_mem_per_block_optin_bytes", pa.int64()),
}
DEVICES_SCHEMA = pa.schema(_HEAD + list(dict(_DEVICE_FIELDS.values()).items()))
PROCESS_GROUPS_SCHEMA = pa.schema(
    _HEAD
    + [
        ("process_group_name", pa.string()),
        ("process_group_desc", pa.string()),
        ("backend_config", pa.string()),
        ("group_size", pa.int64()),
        ("ranks", pa.list_(pa.int64())),
    ]
)
TRACE_METADATA_SCHEMA = pa.schema(_HEAD + [("key", pa.string()), ("value_json", pa.string())])


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def device_rows(metadata: dict[str, Any]) -> tuple[pa.Schema, list[dict[str, Any]]]:
    """One row per entry of ``deviceProperties``."""
    rows = []
    for props in metadata.get("deviceProperties") or []:
        if not isinstance(props, dict):
            continue
        row: dict[str, Any] = {}
        for key, (column, kind) in _DEVICE_FIELDS.items():
            if key in props:
                row[column] = props[key] if kind == pa.string() else _int_or_none(props[key])
        rows.append(row)
    return DEVICES_SCHEMA, rows


def process_group_rows(metadata: dict[str, Any]) -> tuple[pa.Schema, list[dict[str, Any]]]:
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
    return PROCESS_GROUPS_SCHEMA, rows


def metadata_rows(metadata: dict[str, Any]) -> tuple[pa.Schema, list[dict[str, Any]]]:
    """Every other top-level key (environment metadata, profiler logs), value as JSON text."""
    skip = {"deviceProperties", "traceEvents"}
    rows = [
        {"key": key, "value_json": orjson.dumps(value).decode()}
        for key, value in metadata.items()
        if key not in skip
    ]
    return TRACE_METADATA_SCHEMA, rows
