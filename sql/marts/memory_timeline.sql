-- One row per allocator event on the memory curve of a device, in trace order: the totals after the event and its
-- signed size. As torch-tb-profiler's Memory curve, only records with an Addr and both totals are points.
-- grain: run_id, trace_id, device, event_idx
-- source: torch-tb-profiler 0.4.3 run.py::RunProfile.get_memory_curve; ANCHORS.md §3.8
-- column: allocated_bytes: allocated after the event
-- column: reserved_bytes: reserved after the event
-- column: delta_bytes: the event's signed size
select
    run_id,
    trace_id,
    device,
    event_idx,
    ts_ns,
    total_allocated_bytes as allocated_bytes,
    total_reserved_bytes as reserved_bytes,
    bytes as delta_bytes,
    rank
from int_memory_records
where on_curve
    and device is not null
