-- One row per operator name of the run $run_id (op_stats summed over its traces): the run report's operator table,
-- by self device time, then self CPU time (a run whose launches lie in no operator ranks by CPU time).
-- grain: run_id, op_name
-- source: torch-tb-profiler 0.4.3 operator view (op_agg.py); ANCHORS.md §3.2
-- column: calls: calls over every trace
-- column: self_device_ns: GPU time launched by the op itself
-- column: total_device_ns: GPU time launched by the op and its descendants
-- column: self_cpu_ns: host time minus its direct children
-- column: total_cpu_ns: host time of the op with its children
select
    run_id,
    op_name,
    sum(calls) as calls,
    sum(self_device_ns) as self_device_ns,
    sum(total_device_ns) as total_device_ns,
    sum(self_cpu_ns) as self_cpu_ns,
    sum(total_cpu_ns) as total_cpu_ns
from op_stats
where run_id = $run_id
group by run_id, op_name
order by self_device_ns desc nulls last, self_cpu_ns desc, op_name
limit $top
