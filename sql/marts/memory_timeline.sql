-- One row per allocator event of a device, in trace order: the totals after the event, its signed size, and the
-- device's net allocation since the trace began. As torch-tb-profiler's Memory curve, only records with an Addr and
-- both totals are points of the allocated and reserved curve: the others (2021-format traces have neither) keep
-- null totals, and net_allocated_bytes is their curve (quality issue memory_totals_missing says so).
-- grain: run_id, trace_id, device, event_idx
-- source: torch-tb-profiler 0.4.3 run.py::RunProfile.get_memory_curve; ANCHORS.md §3.8
-- column: allocated_bytes: allocated after the event (null where the trace gives no totals)
-- column: reserved_bytes: reserved after the event (null where the trace gives no totals)
-- column: delta_bytes: the event's signed size
-- column: net_allocated_bytes: allocated on the device since the trace began: the running sum of delta_bytes in time order
select
    run_id,
    trace_id,
    device,
    event_idx,
    ts_ns,
    if(on_curve, total_allocated_bytes, null) as allocated_bytes,
    if(on_curve, total_reserved_bytes, null) as reserved_bytes,
    bytes as delta_bytes,
    net_allocated_bytes,
    rank
from int_memory_records
where device is not null
