-- One row per operator of the run $run_id that allocated memory (memory_by_op summed over its traces and devices):
-- the ops that allocate the most, torch-tb-profiler's memory view per op.
-- grain: run_id, op_name
-- source: torch-tb-profiler 0.4.3 memory view (memory_parser.py, per-op statistics); ANCHORS.md §3.6
-- column: allocation_count: allocations by the op and its children
-- column: allocation_bytes: bytes allocated by the op and its children
-- column: self_allocation_bytes: bytes allocated by the op itself
-- column: size_increase_bytes: net allocated by the op and its children
select
    run_id,
    op_name,
    sum(allocation_count) as allocation_count,
    sum(allocation_bytes) as allocation_bytes,
    sum(self_allocation_bytes) as self_allocation_bytes,
    sum(size_increase_bytes) as size_increase_bytes
from memory_by_op
where run_id = $run_id
group by run_id, op_name
having sum(allocation_count) > 0
order by allocation_bytes desc, op_name
limit $top
