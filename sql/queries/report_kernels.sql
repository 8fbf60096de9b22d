-- One row per kernel name of the run $run_id (kernel_stats summed over its traces and ranks): the run report's
-- kernel table, largest total GPU time first. The name is the kernel's whole name as the trace holds it; the page
-- shows a short one and keeps this one on hover.
-- grain: run_id, kernel_name
-- source: torch-tb-profiler 0.4.3 kernel view (kernel_parser.py); HTA 0.5.0 kernel types; ANCHORS.md §3.2
-- column: kernel_type: HTA's kernel type (COMPUTATION, COMMUNICATION, MEMORY, OTHER)
-- column: calls: launches over every trace of the run
-- column: total_ns: GPU time over every trace
-- column: mean_ns: total_ns / calls
-- column: min_ns: the shortest call
-- column: max_ns: the longest call
-- column: uses_tensor_cores: the kernel runs on tensor cores (matrix cores on AMD), by its name
-- column: mean_est_achieved_occupancy_ratio: estimated achieved occupancy, weighted by GPU time (null where the trace has none)
-- column: mean_blocks_per_sm: blocks per SM, weighted by GPU time
-- column: ranks: ranks that ran the kernel
select
    run_id,
    kernel_name,
    any_value(kernel_type) as kernel_type,
    sum(calls) as calls,
    sum(total_ns) as total_ns,
    sum(total_ns) // sum(calls) as mean_ns,
    min(min_ns) as min_ns,
    max(max_ns) as max_ns,
    bool_or(uses_tensor_cores) as uses_tensor_cores,
    sum(mean_est_achieved_occupancy_ratio * total_ns) / nullif(sum(total_ns) filter (
        where mean_est_achieved_occupancy_ratio is not null), 0) as mean_est_achieved_occupancy_ratio,
    sum(mean_blocks_per_sm * total_ns) / nullif(sum(total_ns) filter (where mean_blocks_per_sm is not null), 0)
        as mean_blocks_per_sm,
    count(distinct rank) as ranks
from kernel_stats
where run_id = $run_id
group by run_id, kernel_name
order by total_ns desc, kernel_name
limit $top
