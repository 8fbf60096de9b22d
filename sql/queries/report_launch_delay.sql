-- One row per trace of the run $run_id with kernel launches: how long the device waited for the host's launches
-- (kernel_launches.launch_delay_ns: the device event's start minus its runtime call's end, HTA's launch delay).
-- grain: run_id, trace_id
-- source: HTA 0.5.0 get_cuda_kernel_launch_stats; ANCHORS.md §2.3
-- column: launches: launched device events (kernels, memcpy, memset)
-- column: median_launch_delay_ns: median delay from launch to start (likewise p90_launch_delay_ns, max_launch_delay_ns)
-- column: mean_cpu_dur_ns: mean runtime call time on the host
-- column: short_kernel_launches: launches whose device event is shorter than its runtime call (launch-bound work)
select
    run_id,
    trace_id,
    any_value(rank) as rank,
    count(*) as launches,
    median(launch_delay_ns)::bigint as median_launch_delay_ns,
    quantile_cont(launch_delay_ns, 0.9)::bigint as p90_launch_delay_ns,
    max(launch_delay_ns) as max_launch_delay_ns,
    avg(cpu_dur_ns)::bigint as mean_cpu_dur_ns,
    count(*) filter (where gpu_dur_ns < cpu_dur_ns) as short_kernel_launches
from kernel_launches
where run_id = $run_id
group by run_id, trace_id
order by rank, trace_id
