"""The raw tables: which events each holds and how its typed columns come out of ``args``.

Each entry is the column list of one ``select ... from chunk where route = <table>``; the
``chunk`` table, its ``route``, ``ts_ns`` and ``dur_ns`` (exact integer ns) columns and ``args``
(a struct of just the keys the table uses, see ``ARGS_USED``) are built by :mod:`pipelines.parse`.
Times come out in nanoseconds relative to the trace's base time, which is only known once the
whole file is read: the columns named in ``ABSOLUTE_TIME_COLUMNS`` get the base (0 for legacy
absolute-µs traces) added when the tables are written. Every table also gets ``run_id``,
``trace_id`` and ``rank`` in front, so that its file is a lake data file as it stands.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from pipelines.schema import ARG_TYPES

_SLICE = """
    event_idx,
    pid,
    tid,
    name,
    cat,
    ts_ns,
    dur_ns,
    ts_ns + dur_ns as end_ns"""

_DEVICE_ACTIVITY = """
    args.device as device,
    try_cast(args.stream as bigint) as stream,
    args.correlation as correlation,
    args."External id" as external_id,
    args.context as context,
    args."graph id" as graph_id,
    args."graph node id" as graph_node_id"""

_COLLECTIVE = """
    args."Collective name" as collective_name,
    args."In msg nelems" as in_msg_nelems,
    args."Out msg nelems" as out_msg_nelems,
    args."In msg size" as in_msg_size,
    args."Out msg size" as out_msg_size,
    args."Group size" as group_size,
    args.dtype as dtype,
    args."In split size" as in_split_size,
    args."Out split size" as out_split_size,
    coalesce(args."Process Group Name", args."Process Group ID") as process_group_name,
    args."Process Group Description" as process_group_desc,
    args."Process Group Ranks" as process_group_ranks,
    args.Seq as seq,
    args."Comms Id" as comms_id"""

# grid/block are JSON arrays, or a JSON string holding one (ROCm runtime args).
_XYZ = "try_cast((case when json_type({j}) = 'VARCHAR' then json({j} ->> '$') else {j} end) ->> '$[{i}]' as bigint)"


def _xyz(arg: str, prefix: str) -> str:
    return ",\n".join(
        f"    {_XYZ.format(j=f'args.{arg}', i=i)} as {prefix}_{axis}" for i, axis in enumerate("xyz")
    )


_TYPED_COLUMNS: dict[str, str] = {
    "kernels": f"""{_SLICE},{_DEVICE_ACTIVITY},
    args.queued as queued,
    args."registers per thread" as registers_per_thread,
    args."shared memory" as shared_memory_bytes,
    args."blocks per SM" as blocks_per_sm,
    args."warps per SM" as warps_per_sm,
    args."est. achieved occupancy %" as est_achieved_occupancy_pct,
{_xyz("grid", "grid")},
{_xyz("block", "block")},
    args.kind as kind,{_COLLECTIVE}""",
    "gpu_memcpy": f"""{_SLICE},{_DEVICE_ACTIVITY},
    args.bytes as bytes,
    args."memory bandwidth (GB/s)" as memory_bandwidth_gbps""",
    "gpu_memset": f"""{_SLICE},{_DEVICE_ACTIVITY},
    args.bytes as bytes,
    args."memory bandwidth (GB/s)" as memory_bandwidth_gbps""",
    "gpu_syncs": f"""{_SLICE},{_DEVICE_ACTIVITY},
    args.cuda_sync_kind as sync_kind,
    args.wait_on_stream as wait_on_stream,
    args.wait_on_cuda_event_record_corr_id as wait_on_event_record_correlation,
    args.wait_on_cuda_event_id as wait_on_event_id""",
    "runtime_calls": f"""{_SLICE},
    args.correlation as correlation,
    args."External id" as external_id,
    args.cbid as cbid,
    args.device as device,
    try_cast(args.stream as bigint) as stream,
    args.kernel as kernel_name""",
    "cpu_ops": f"""{_SLICE},
    args."External id" as external_id,
    args."Record function id" as record_function_id,
    args."Sequence number" as sequence_number,
    args."Fwd thread id" as fwd_thread_id,
    coalesce(args."Ev Idx", args."Profiler Event Index") as ev_idx,
    args."Input Dims" as input_dims,
    args."Input type" as input_types,
    args."Input Strides" as input_strides,
    args."Concrete Inputs" as concrete_inputs,
    args.flops as flops,
    args."Call stack" as call_stack,
    args."Module Hierarchy" as module_hierarchy,
    args.kernel_backend as kernel_backend,
    args.kernel_hash as kernel_hash,
    try_cast(args.stream as bigint) as stream,
    args."Device" as device,{_COLLECTIVE},
    args."Global rank start" as global_rank_start,
    args."Global rank stride" as global_rank_stride""",
    "annotations": f"""{_SLICE},
    args."External id" as external_id,
    args."Record function id" as record_function_id,
    coalesce(args."Ev Idx", args."Profiler Event Index") as ev_idx,
    args."Input Dims" as input_dims,
    args."Input type" as input_types,
    lower(cat) = 'gpu_user_annotation' as on_device,
    args.device as device,
    try_cast(args.stream as bigint) as stream""",
    "python_functions": f"""{_SLICE},
    args."Python id" as python_id,
    args."Python parent id" as python_parent_id,
    args."Python module id" as python_module_id""",
    "profiler_spans": f"""{_SLICE},
    args."Op count" as op_count""",
    "memory_events": """
    event_idx,
    pid,
    tid,
    ts_ns,
    args.Bytes as bytes,
    args."Total Allocated" as total_allocated_bytes,
    args."Total Reserved" as total_reserved_bytes,
    args.Addr as addr,
    args."Device Type" as device_type,
    args."Device Id" as device_id,
    args."Ev Idx" as ev_idx""",
    "markers": """
    event_idx,
    pid,
    tid,
    name,
    s as scope,
    ts_ns""",
    "flows": """
    event_idx,
    ph,
    cat,
    name,
    id as flow_id,
    pid,
    tid,
    ts_ns,
    bp as binding""",
    "track_names": """
    event_idx,
    pid,
    tid,
    name as kind,
    args.name as value,
    args.labels as labels,
    args.sort_index as sort_index""",
    "other_events": """
    event_idx,
    ph,
    cat,
    name,
    pid,
    tid,
    ts_ns,
    dur_ns""",
}

# Counter (``ph: "C"``) events: one row per value in ``args``. kineto writes CUPTI PM sampling as one event per metric,
# named by it, with its value under the key "" (``{"": 42.5}``), and MTIA counters as one event of several named
# values; ``counter`` is the key, or the event's name where the key is empty. A value that is no number is kept as
# JSON in ``other_args``; an event with no values has one row with neither.
_COUNTER_ENTRIES = """list_transform(
        map_entries(json_transform(raw_args, '"MAP(VARCHAR, JSON)"')),
        entry -> {
            'counter': coalesce(nullif(entry.key, ''), name),
            'value': try_cast(entry.value as double),
            'other_args': if(try_cast(entry.value as double) is null, entry.value, null)
        }
    )"""
_COUNTERS = f"""
    event_idx,
    pid,
    tid,
    cat,
    name,
    ts_ns,
    unnest(coalesce(
        nullif(if(json_type(raw_args) = 'OBJECT', {_COUNTER_ENTRIES}, []), []),
        [{{
            'counter': null::varchar,
            'value': null::double,
            'other_args': if(json_type(raw_args) = 'OBJECT', null, raw_args)
        }}]
    ), recursive := true)"""

# Derived from the events rather than routed: one row per ProfilerStep#N range.
STEPS_COLUMNS = """
    cast(regexp_extract(name, '^ProfilerStep#(\\d+)', 1) as bigint) as step,
    event_idx,
    pid,
    tid,
    ts_ns,
    dur_ns,
    ts_ns + dur_ns as end_ns"""
STEPS_FILTER = (
    "ph = 'X' and lower(cat) in ('user_annotation', 'cpu_op', 'operator') "
    "and regexp_matches(name, '^ProfilerStep#\\d+')"
)

ABSOLUTE_TIME_COLUMNS = ("ts_ns", "end_ns")

_ARG_REF = re.compile(r'args\.(?:"([^"]+)"|(\w+))')


def _args_used(columns: str) -> dict[str, str]:
    used = {quoted or bare for quoted, bare in _ARG_REF.findall(columns)}
    return {key: kind for key, kind in ARG_TYPES.items() if key in used}


ARGS_USED: dict[str, dict[str, str]] = {
    table: _args_used(columns)
    for table, columns in {**_TYPED_COLUMNS, "counters": _COUNTERS, "steps": STEPS_COLUMNS}.items()
}
"""Per table, the ``args`` keys its columns read and their types: only those are decoded for its rows."""


def _other_args(used: dict[str, str]) -> str:
    """The event's ``args`` without the keys ``used`` (typed columns already), as JSON; null when none is left.

    A JSON merge patch whose values are null deletes those keys. Most events carry no other key, and the patch
    (a parse and a rewrite) is skipped for them: it runs only when ``args`` has more keys than typed columns
    that came out non-null. Counting keys is a parse too; an object without a comma has at most one key, so when
    one typed column came out non-null, that key is it and nothing needs counting (metadata events, mostly)."""
    if not used:
        return "raw_args"
    patch = json.dumps(dict.fromkeys(used)).replace("'", "''")
    decoded = " + ".join(f'(args."{key}" is not null)::int' for key in used)
    return (
        f"case when ({decoded}) = 1 and not contains(raw_args::varchar, ',') then null"
        f" when len(json_keys(raw_args)) > {decoded}"
        f" then nullif(json_merge_patch(raw_args, '{patch}'), '{{}}') end"
    )


RAW_TABLE_COLUMNS: dict[str, str] = {
    **{
        table: f"{columns},\n    {_other_args(ARGS_USED[table])} as other_args"
        for table, columns in _TYPED_COLUMNS.items()
    },
    "counters": _COUNTERS,
}
"""Per event table, its column list: the typed columns, then ``other_args`` (JSON) keeping every ``args`` key that
no typed column reads, so that nothing in a trace is dropped."""

SLICE_TABLES: tuple[str, ...] = tuple(table for table, columns in _TYPED_COLUMNS.items() if _SLICE in columns)
"""Tables of complete (``X``) events with ``pid``, ``tid``, ``ts_ns`` and ``dur_ns``; ``other_events`` holds the
rest of them, with its ``ph``."""

EVENT_TABLES: tuple[str, ...] = tuple(RAW_TABLE_COLUMNS)
"""Tables that partition the events: each event is in one of them, once (``counters``: once per value)."""

TRACES_COLUMNS = {
    "trace_id": "VARCHAR",
    "rank": "BIGINT",
    "source_uri": "VARCHAR",
    "size_bytes": "BIGINT",
    "etag": "VARCHAR",
    "event_count": "BIGINT",
    "schema_version": "BIGINT",
    "base_time_ns": "BIGINT",
    "window_start_ns": "BIGINT",
    "window_end_ns": "BIGINT",
    "parser_version": "VARCHAR",
    "quality_notes": "VARCHAR",
    "status": "VARCHAR",
    "rank_source": "VARCHAR",
    "world_size": "BIGINT",
    "backend": "VARCHAR",
    "run_source_uri": "VARCHAR",
    "ingested_at": "TIMESTAMPTZ",
    "in_analysis": "BOOLEAN",
}
"""The ``traces`` table's columns after ``run_id``: one row per trace file of the run (:mod:`pipelines.staging.run`)."""


@dataclass(frozen=True)
class RawTable:
    """What one raw table holds: a line for people, and the meaning of its columns beyond the common ones
    (``transforms.docs.COMMON_COLUMNS``) where a name does not say it."""

    summary: str
    columns: dict[str, str] = field(default_factory=dict)


RAW_TABLES: dict[str, RawTable] = {
    "kernels": RawTable("one row per GPU kernel (and MTIA device event), with launch configuration, occupancy and "
                        "NCCL collective args", {
        "queued": "time the kernel waited in its queue, from the trace", "registers_per_thread": "registers per thread",
        "shared_memory_bytes": "static + dynamic shared memory", "blocks_per_sm": "blocks per SM (launch config)",
        "warps_per_sm": "warps per SM", "est_achieved_occupancy_pct": "profiler's estimated achieved occupancy, in %",
        "collective_name": "NCCL collective (allreduce, allgather, ...)", "in_msg_nelems": "input elements",
        "out_msg_nelems": "output elements", "group_size": "ranks in the collective's group"}),
    "gpu_memcpy": RawTable("one row per GPU memory copy", {
        "bytes": "bytes copied", "memory_bandwidth_gbps": "as the trace says"}),
    "gpu_memset": RawTable("one row per GPU memset", {
        "bytes": "bytes set", "memory_bandwidth_gbps": "as the trace says"}),
    "gpu_syncs": RawTable("one row per cuda_sync event (stream, event and device synchronization)"),
    "runtime_calls": RawTable("one row per CUDA/HIP/XPU/MTIA runtime or driver call (cudaLaunchKernel, ...), with its "
                              "correlation id"),
    "cpu_ops": RawTable("one row per host operator (cat cpu_op): ATen ops and record_function ranges, with input "
                        "shapes and record_param_comms args", {
        "stream": "the GPU stream a torch.compile (Inductor) kernel launch names in its args; null for other ops"}),
    "annotations": RawTable("one row per user annotation (record_function: ProfilerStep#N, DataLoader, nccl:*) and "
                            "GPU user annotation"),
    "python_functions": RawTable("one row per Python function event (with_stack=True / with_modules=True)"),
    "profiler_spans": RawTable("the profiler's own spans (PyTorch Profiler (N), buffer flushes)"),
    "memory_events": RawTable("one row per allocator event ([memory], profile_memory=True): bytes, totals, address, "
                              "device", {
        "total_allocated_bytes": "allocated on the device after the event",
        "total_reserved_bytes": "reserved by the caching allocator after the event"}),
    "markers": RawTable("instant events other than memory (Iteration Start, Record Window End)"),
    "flows": RawTable("one row per flow event (ac2g launch links, fwdbwd autograd links)"),
    "track_names": RawTable("process and thread names, labels and sort order (M events)"),
    "counters": RawTable("one row per value of a counter event (ph C: kineto's hardware_counters, MTIA counters)", {
        "counter": "the counter: its args key, or the event's name where the key is empty (CUPTI PM sampling)",
        "value": "the counter's value", "other_args": "a value that is not a number, as JSON"}),
    "other_events": RawTable("every event no other raw table takes, kept so that nothing is lost"),
    "steps": RawTable("one row per ProfilerStep#N range on the host"),
    "devices": RawTable("one row per device in deviceProperties (GPU name, memory, SMs)", {
        "total_global_mem_bytes": "the GPU's memory", "num_sms": "streaming multiprocessors"}),
    "process_groups": RawTable("one row per process group in distributedInfo.pg_config"),
    "trace_metadata": RawTable("top-level keys of the trace other than traceEvents, value as JSON"),
    "traces": RawTable("one row per trace file: where it came from, its rank, size, window, parser and status", {
        "source_uri": "the trace file's URL", "size_bytes": "the file's size as stored",
        "event_count": "events in traceEvents", "base_time_ns": "baseTimeNanoseconds (0 for legacy traces)",
        "window_start_ns": "first event's start", "window_end_ns": "last event's end",
        "quality_notes": "problems found while parsing",
        "status": "ok; partial (events lost, or salvaged from a damaged file); failed (no event read)",
        "in_analysis": "false for a trace left out of the analysis tables: another trace of the run claims its rank "
                       "over an overlapping window and has more events (a duplicate_rank error)"}),
    "quality_issues": RawTable("one row per problem found in a trace (truncation, missing rank, failed check, ...)", {
        "severity": "error or warning", "code": "a short stable name of the problem", "message": "what was found",
        "count": "how many times"}),
}
"""Every raw table a run's ingest writes: the event tables, then those made from the trace's other keys, then the
run's own. The one registry of raw tables: the parse, the commit, ``tracelake tables`` and Dagster's assets read it."""

ADDED_COLUMNS: dict[str, dict[str, str]] = {"traces": {"in_analysis": "BOOLEAN"}, "cpu_ops": {"stream": "BIGINT"}}
"""Raw columns added since a lake's first version, with their types: a run staged or committed before one existed
reads it as null (as DuckLake reads a table's files older than a column), so models may use them on any run."""
