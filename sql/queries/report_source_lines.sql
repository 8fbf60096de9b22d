-- One row per source line and function of the run $run_id (source_stats summed over its traces): the run report's
-- source lines, by device time, then CPU time.
-- grain: run_id, source_file, source_line, function
-- source: torch-tb-profiler 0.4.3 operator view grouped by call stack (op_agg.py); ANCHORS.md §3.2
-- column: calls: calls of ops at this line
-- column: total_device_ns: GPU time launched from this line
-- column: total_cpu_ns: host time of the ops called at this line
select
    run_id,
    source_file,
    source_line,
    function,
    source_file || ':' || source_line as location,
    sum(calls) as calls,
    sum(total_device_ns) as total_device_ns,
    sum(total_cpu_ns) as total_cpu_ns
from source_stats
where run_id = $run_id
group by all
order by total_device_ns desc, total_cpu_ns desc, location
limit $top
