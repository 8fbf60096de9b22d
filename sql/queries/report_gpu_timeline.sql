-- The GPU utilization curve of the run $run_id, one row per GPU of a trace and time bucket
-- (gpu_utilization_timeline), with how many traces its rank has (a series is labelled by its trace when several).
-- grain: run_id, trace_id, device, bucket_start_ns
-- source: torch-tb-profiler 0.4.3 GPU utilization over time (gpu_metrics_parser.py); ANCHORS.md §3.5
-- column: bucket_start_ns: the bucket's start
-- column: gpu_utilization_ratio: the share of the bucket a kernel runs
-- column: traces_per_rank: the rank's traces
select
    run_id,
    rank,
    trace_id,
    device,
    bucket_start_ns,
    gpu_utilization_ratio,
    count(distinct trace_id) over (partition by rank) as traces_per_rank
from gpu_utilization_timeline
where run_id = $run_id
order by rank, trace_id, device, bucket_start_ns
