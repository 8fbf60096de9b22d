-- One row per rank of the run $run_id: torch-tb-profiler's step breakdown (step_breakdown) as the run report's step
-- chart draws it, the mean of each part over every step the rank ran (warm-up and outlier steps included: the
-- headline step time, run_metrics.step_ns, is the median of the healthy steps, a figure of its own). A run without
-- ProfilerStep has one "step", its whole trace.
-- grain: run_id, rank
-- source: torch-tb-profiler 0.4.3 step time breakdown (overall_parser.py); ANCHORS.md §3.1
-- column: steps: the steps the means are over
-- column: total_ns: mean step time over all of the rank's steps
-- column: kernel_ns: mean kernel time per step (likewise memcpy_ns, memset_ns, communication_ns, runtime_ns, dataloader_ns, cpu_exec_ns, other_ns)
select
    run_id,
    rank,
    count(*) as steps,
    avg(total_ns) as total_ns,
    avg(kernel_ns) as kernel_ns,
    avg(memcpy_ns) as memcpy_ns,
    avg(memset_ns) as memset_ns,
    avg(communication_ns) as communication_ns,
    avg(runtime_ns) as runtime_ns,
    avg(dataloader_ns) as dataloader_ns,
    avg(cpu_exec_ns) as cpu_exec_ns,
    avg(other_ns) as other_ns
from step_breakdown
where run_id = $run_id
group by run_id, rank
order by rank
