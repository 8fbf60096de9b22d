"""The typed shape of Kineto events as DuckDB's JSON reader decodes them, and how each is routed.

The event's own keys are decoded into columns by the reader; ``args`` is kept as JSON, and each
table decodes only the keys it uses (``tables.ARGS_USED``) for only its own rows, because decoding
every key of ``ARG_TYPES`` into a struct for every event costs about as much as the rest of the
parse. Every ``args`` key the Kineto writer, HTA's config and the shared traces use is typed in
``ARG_TYPES``; ids kineto writes as uint64 (``correlation``, graph ids, ``Comms Id``) are UBIGINT, which
Parquet keeps exactly (a value above int64 became null as BIGINT, and HUGEINT is written as a double). Keys that differ only in case (``bytes`` of a memcpy, ``Bytes`` of a ``[memory]``
event) never meet in one table's struct, whose fields must be unique ignoring case. Legacy
spellings are renamed in the raw bytes first (``KEY_RENAMES``); a quoted key followed by a colon
cannot occur inside a JSON string value.
"""

from __future__ import annotations

# Legacy spellings of a key that tables read under its modern name.
KEY_RENAMES: dict[bytes, bytes] = {
    b'"external id":': b'"External id":',  # 2021 format
}

ARG_TYPES: dict[str, str] = {
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
    "flops": "BIGINT",  # with_flops=True, in traces whose writer exports it
    "Call stack": "VARCHAR",
    "Module Hierarchy": "VARCHAR",
    "kernel_backend": "VARCHAR",
    "kernel_hash": "VARCHAR",
    "Device": "BIGINT",  # 2021 Operator args
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
    "Comms Id": "UBIGINT",  # uint64 in kineto's writer, as are correlation and graph ids
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
    "correlation": "UBIGINT",
    "graph id": "UBIGINT",  # kernels and copies of a CUDA graph replay
    "graph node id": "UBIGINT",
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
    "bytes": "BIGINT",  # gpu_memcpy / gpu_memset
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


# Column types handed to DuckDB's read_json. ts/dur are read as their JSON text: the reader goes
# through a double for numbers, which is 1 ns off for 16-digit timestamps.
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
    "args": "JSON",
}


# Whole µs below 2^62 ns: with any decimals, a time of this many µs stays under the bound.
_MAX_TIME_US = (1 << 62) // 1000


def time_ns(column: str) -> str:
    """Exact integer nanoseconds from the µs text ``column``, rounded to whole ns as a decimal cast does.

    Three paths, cheapest first, each exact where it answers:
    - Text of up to 18 characters with ``e3`` appended casts straight to DECIMAL(18,0), an int64 (~0.2 µs a
      value); DuckDB parses up to 18 digits of such text exactly (a fuzz of 300k numbers agreed with the
      general cast up to 19 characters, and disagreed from 20). It takes text whose integer part has at most
      15 characters: the cast does not hold the value to 18 digits, so ``6095981265131609.9`` would pass the
      2^62 ns bound below; absolute epoch µs (16 digits) take the next path.
    - Plain unsigned decimal text, the form of absolute epoch µs and of ``displayTimeUnit: "ns"`` times such
      as ``1712195495519689.047``: integer part times 1000, plus the first three decimals, plus one when the
      fourth is 5 or more (~0.5 µs a value).
    - Anything else (signs, exponents) takes the general cast to DECIMAL(22,3). It parses through an int128
      and costs 20-80 µs a value on long text: 109k absolute times took 2.3 s, where the path above takes 0.04 s.

    Text that is no number, or a time of 2^62 ns (4.6e15 µs, 146 years) or more, gives NULL
    rather than an error: the parser reports such values (:mod:`pipelines.checks`) and keeps the
    event. The bound keeps ``ts_ns + dur_ns`` within int64; the general cast checks it as the ``* 2000``
    cast's overflow, halved exactly after, the decimal path on the integer part.
    """
    integer, decimals = f"split_part({column}, '.', 1)", f"split_part({column}, '.', 2)"
    return (
        f"coalesce(case when length({column}) <= 15 or (length({column}) <= 18 and instr({column}, '.') between 2 and 16)"
        f" then try_cast({column} || 'e3' as DECIMAL(18,0))::bigint end,"
        f" case when regexp_full_match({column}, '[0-9]{{1,16}}(\\.[0-9]*)?')"
        f" and {integer}::hugeint < {_MAX_TIME_US}"
        f" then {integer}::bigint * 1000 + rpad(left({decimals}, 3), 3, '0')::int"
        f" + (substr({decimals}, 4, 1) >= '5')::int end,"
        f" try_cast(try_cast({column} as DECIMAL(22,3)) * 2000 as bigint) // 2)"
    )


# Which raw table an event lands in: evaluated once per event, so every event lands in exactly one.
# ``lcat`` is ``lower(cat)``, computed once per event rather than once per branch.
ROUTE = """
case
    when ph = 'X' then case
        when lcat in ('kernel', 'mtia_ccp_events') then 'kernels'
        when lcat in ('gpu_memcpy', 'memcpy') then 'gpu_memcpy'
        when lcat in ('gpu_memset', 'memset') then 'gpu_memset'
        when lcat = 'cuda_sync' then 'gpu_syncs'
        when lcat = 'runtime' or cat like '%\\_runtime' escape '\\'
             or cat like '%\\_driver' escape '\\' then 'runtime_calls'
        when lcat in ('cpu_op', 'operator') then 'cpu_ops'
        when lcat in ('user_annotation', 'gpu_user_annotation') then 'annotations'
        when lcat in ('python_function', 'python') then 'python_functions'
        when cat in ('Trace', 'cuda_profiler_range') then 'profiler_spans'
        else 'other_events'
    end
    when ph in ('i', 'I') and name = '[memory]' then 'memory_events'
    when ph in ('i', 'I') then 'markers'
    when ph in ('s', 't', 'f') then 'flows'
    when ph = 'M' then 'track_names'
    when ph = 'C' then 'counters'
    else 'other_events'
end
"""
