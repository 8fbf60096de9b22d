"""The typed shape of Kineto events as DuckDB's JSON reader decodes them, and how each is routed.

Every ``args`` key the Kineto writer, HTA's config and the shared traces use is a typed struct
field, so the JSON is parsed once, in C++, straight into columns. Keys that differ only in case
(DuckDB struct fields must be unique ignoring case) are renamed in the raw bytes first
(``KEY_RENAMES``); a quoted key followed by a colon cannot occur inside a JSON string value.
"""

from __future__ import annotations

# Legacy spellings that collide, ignoring case, with the modern key of another category.
KEY_RENAMES: dict[bytes, bytes] = {
    b'"external id":': b'"External id":',  # 2021 format
    b'"bytes":': b'"copy bytes":',  # gpu_memcpy / gpu_memset, vs [memory] "Bytes"
    b'"Device":': b'"op device":',  # 2021 Operator args, vs kernel "device"
}

_ARG_TYPES: dict[str, str] = {
    # cpu_op / user_annotation
    "External id": "BIGINT",
    "Record function id": "BIGINT",
    "Sequence number": "BIGINT",
    "Fwd thread id": "BIGINT",
    "Ev Idx": "BIGINT",
    "Profiler Event Index": "BIGINT",
    "Input Dims": "JSON",
    "Input type": "JSON",
    "Input Strides": "JSON",
    "Concrete Inputs": "JSON",
    "Call stack": "VARCHAR",
    "Module Hierarchy": "VARCHAR",
    "kernel_backend": "VARCHAR",
    "kernel_hash": "VARCHAR",
    "op device": "BIGINT",
    # collectives (record_param_comms cpu_ops and NCCL kernels)
    "Collective name": "VARCHAR",
    "In msg nelems": "BIGINT",
    "Out msg nelems": "BIGINT",
    "In msg size": "BIGINT",
    "Out msg size": "BIGINT",
    "Group size": "BIGINT",
    "dtype": "VARCHAR",
    "In split size": "VARCHAR",
    "Out split size": "VARCHAR",
    "Process Group Name": "VARCHAR",
    "Process Group Description": "VARCHAR",
    "Process Group Ranks": "VARCHAR",
    "Process Group ID": "VARCHAR",
    "Global rank start": "BIGINT",
    "Global rank stride": "BIGINT",
    "Rank": "BIGINT",
    "Seq": "BIGINT",
    # python_function
    "Python id": "BIGINT",
    "Python parent id": "BIGINT",
    "Python module id": "BIGINT",
    # runtime / device activity
    "cbid": "BIGINT",
    "correlation": "BIGINT",
    "queued": "BIGINT",
    "device": "BIGINT",
    "context": "BIGINT",
    "stream": "VARCHAR",  # an int in CUDA traces, sometimes a string elsewhere
    "registers per thread": "BIGINT",
    "shared memory": "BIGINT",
    "blocks per SM": "DOUBLE",
    "warps per SM": "DOUBLE",
    "grid": "JSON",  # [x, y, z], or the string "[x, y, z]" in ROCm runtime args
    "block": "JSON",
    "est. achieved occupancy %": "DOUBLE",
    "kind": "VARCHAR",
    "kernel": "VARCHAR",
    "copy bytes": "BIGINT",
    "memory bandwidth (GB/s)": "DOUBLE",
    # cuda_sync
    "cuda_sync_kind": "VARCHAR",
    "wait_on_stream": "BIGINT",
    "wait_on_cuda_event_record_corr_id": "BIGINT",
    "wait_on_cuda_event_id": "BIGINT",
    # [memory] instant events
    "Bytes": "BIGINT",
    "Total Allocated": "BIGINT",
    "Total Reserved": "BIGINT",
    "Addr": "BIGINT",
    "Device Type": "BIGINT",
    "Device Id": "BIGINT",
    # Trace spans and metadata events
    "Op count": "BIGINT",
    "name": "VARCHAR",
    "labels": "VARCHAR",
    "sort_index": "BIGINT",
}


def _struct(fields: dict[str, str]) -> str:
    return "STRUCT(" + ", ".join(f'"{name}" {kind}' for name, kind in fields.items()) + ")"


# Column types handed to DuckDB's read_json. ts/dur are read as their JSON text: the reader goes
# through a double for numbers, which is 1 ns off for 16-digit timestamps; the text cast to
# DECIMAL(22,3) (``EVENT_TIME_TYPE``) makes ``ts * 1000`` exact integer nanoseconds.
EVENT_TIME_TYPE = "DECIMAL(22,3)"
EVENT_COLUMNS: dict[str, str] = {
    "ph": "VARCHAR",
    "cat": "VARCHAR",
    "name": "VARCHAR",
    "pid": "VARCHAR",
    "tid": "VARCHAR",
    "ts": "VARCHAR",
    "dur": "VARCHAR",
    "id": "VARCHAR",
    "bp": "VARCHAR",
    "s": "VARCHAR",
    "args": _struct(_ARG_TYPES),
}

# Which raw table an event lands in: evaluated once per event, so every event lands in exactly one.
ROUTE = """
case
    when ph = 'X' and lower(cat) in ('kernel', 'mtia_ccp_events') then 'kernels'
    when ph = 'X' and lower(cat) in ('gpu_memcpy', 'memcpy') then 'gpu_memcpy'
    when ph = 'X' and lower(cat) in ('gpu_memset', 'memset') then 'gpu_memset'
    when ph = 'X' and lower(cat) = 'cuda_sync' then 'gpu_syncs'
    when ph = 'X' and (lower(cat) = 'runtime' or cat like '%\\_runtime' escape '\\'
                       or cat like '%\\_driver' escape '\\') then 'runtime_calls'
    when ph = 'X' and lower(cat) in ('cpu_op', 'operator') then 'cpu_ops'
    when ph = 'X' and lower(cat) in ('user_annotation', 'gpu_user_annotation') then 'annotations'
    when ph = 'X' and lower(cat) in ('python_function', 'python') then 'python_functions'
    when ph = 'X' and cat in ('Trace', 'cuda_profiler_range') then 'profiler_spans'
    when ph in ('i', 'I') and name = '[memory]' then 'memory_events'
    when ph in ('i', 'I') then 'markers'
    when ph in ('s', 't', 'f') then 'flows'
    when ph = 'M' then 'track_names'
    else 'other_events'
end
"""
