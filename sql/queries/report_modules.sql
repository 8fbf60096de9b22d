-- One row per module path of the run $run_id (module_stats summed over its traces): the module view, by host time.
-- grain: run_id, module_path
-- source: torch-tb-profiler 0.4.3 module view (module_parser.py); ANCHORS.md §3.7
-- column: calls: the module's forward calls
-- column: total_cpu_ns: host time of the module with its children
-- column: self_cpu_ns: host time outside its child modules
-- column: total_device_ns: GPU time launched inside the module
select
    run_id,
    module_path,
    sum(calls) as calls,
    sum(total_cpu_ns) as total_cpu_ns,
    sum(self_cpu_ns) as self_cpu_ns,
    sum(total_device_ns) as total_device_ns
from module_stats
where run_id = $run_id
group by run_id, module_path
order by total_device_ns desc, total_cpu_ns desc, module_path
limit $top
