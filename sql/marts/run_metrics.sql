-- One row per run and headline metric: the numbers a run is judged by against its baseline (run_regressions, the
-- regression gate `tracelake check`) and drawn over time in the fleet view. A metric's name ends in its unit.
-- Each is the median over the run's healthy steps of the step's value across the ranks, with a robust spread: the
-- median absolute deviation of those steps' values over their median (MAD / median). Healthy steps are the
-- ProfilerStep numbers that no trace of the run flags as warm-up or outlier (step_health); a run without ProfilerStep
-- has the steps int_steps finds (repeated annotations, graph launches, else one step 0 for the whole trace), all
-- of them healthy.
--   step_ns (higher is worse): the step's host time (step_health.total_ns) on its slowest rank, which sets the pace of
--     a synchronous job; runs with ProfilerStep only.
--   exposed_communication_ns (higher is worse): communication not hidden under computation
--     (comm_overlap_by_step.communication_ns), the mean over ranks; runs with communication only.
--   step_gpu_utilization_ratio (lower is worse): the share of the step during which a kernel runs
--     (step_breakdown.step_gpu_utilization_ratio), the mean over ranks; runs with GPU kernels only. It is the
--     median healthy step's, not gpu_metrics.gpu_utilization_ratio (tb_plugin's GPU summary: busy time over the
--     trace's whole step window, warm-up and outlier steps included, per GPU): the two differ where steps do
--     (nccl_rank0_of_2: 17.3 % here, 23.3 % there), so they have two names.
--   mfu_ratio (lower is worse): model FLOPs utilization (step_mfu.mfu_ratio), the mean over ranks; runs whose
--     steps have a known GPU peak only.
--   <type>_kernel_ns, one per HTA kernel type the run has (computation_kernel_ns, communication_kernel_ns,
--     memory_kernel_ns, other_kernel_ns; higher is worse): the summed time of the GPU activities of that type
--     (int_kernels_classified: kernels, memcpy, memset) starting in the step (int_steps' device-side range), the mean
--     over the ranks that ran the step.
-- peak_memory_bytes (higher is worse) is measured once per run (no spread, no steps): the highest allocated memory
-- of any GPU (memory_peaks), the CPU's in a run without GPU memory events.
-- grain: run_id, metric
-- source: tracelake (issue 39); healthy steps as step_health, a step's GPU utilization as torch-tb-profiler 0.4.3's
-- step time breakdown (overall_parser.py: kernel time / step time), MFU as step_mfu (PaLM's), kernel types as HTA 0.5.0 get_kernel_type; ANCHORS.md §2.2, §3.4,
-- §3.5
-- column: metric: the headline metric, its unit as its suffix: step_ns, exposed_communication_ns, step_gpu_utilization_ratio, mfu_ratio, <type>_kernel_ns, peak_memory_bytes
-- column: job: the run's job: its run_id up to the last '.', i.e. the runs' parent folder (a run_id without '.' is its own job)
-- column: started_ns: when the run started: its earliest event (runs.first_ts_ns)
-- column: value: the metric's value, in its name's unit: the median over the healthy steps (peak_memory_bytes: the run's peak)
-- column: spread: the step-to-step noise: median absolute deviation of the healthy steps' values / their median (null for peak_memory_bytes)
-- column: steps: the healthy steps the value is the median of (null for peak_memory_bytes)
-- column: higher_is_worse: true where a higher value is a regression (times, memory), false where a lower one is (utilization, MFU)
with

profiled_steps as (
    select run_id, step
    from step_health
    group by run_id, step
    having not bool_or(is_warmup or is_outlier)
),

healthy_steps as (
    select run_id, step
    from profiled_steps
    union
    select run_id, step
    from int_steps
    where run_id not in (select run_id from step_health)
),

ranks_in_steps as (
    select run_id, step, count(distinct trace_id) as traces
    from int_steps
    join healthy_steps using (run_id, step)
    group by run_id, step
),

gpu_runs as (
    select run_id
    from step_breakdown
    group by run_id
    having sum(kernel_ns) > 0
),

activity_in_steps as (
    select activity.run_id, int_steps.step, activity.kernel_type, activity.dur_ns
    from int_kernels_classified as activity
    asof join int_steps
        on activity.run_id = int_steps.run_id
        and activity.trace_id = int_steps.trace_id
        and activity.ts_ns >= int_steps.start_ns
    where activity.ts_ns < int_steps.end_ns
),

kernel_types as (
    select distinct run_id, kernel_type
    from activity_in_steps
),

step_samples as (
    select step_health.run_id, step_health.step, 'step_ns' as metric, max(step_health.total_ns)::double as sample
    from step_health
    join healthy_steps using (run_id, step)
    group by all
    union all
    select comm.run_id, comm.step, 'exposed_communication_ns', avg(comm.communication_ns)
    from comm_overlap_by_step as comm
    join healthy_steps using (run_id, step)
    group by all
    union all
    select breakdown.run_id, breakdown.step, 'step_gpu_utilization_ratio', avg(breakdown.step_gpu_utilization_ratio)
    from step_breakdown as breakdown
    join healthy_steps using (run_id, step)
    join gpu_runs using (run_id)
    group by all
    union all
    select mfu.run_id, mfu.step, 'mfu_ratio', avg(mfu.mfu_ratio)
    from step_mfu as mfu
    join healthy_steps using (run_id, step)
    where mfu.mfu_ratio is not null
    group by all
    union all
    select kernel_types.run_id, ranks_in_steps.step, lower(kernel_types.kernel_type) || '_kernel_ns',
           coalesce(sum(activity.dur_ns), 0) / any_value(ranks_in_steps.traces)
    from kernel_types
    join ranks_in_steps using (run_id)
    left join activity_in_steps as activity using (run_id, step, kernel_type)
    group by kernel_types.run_id, ranks_in_steps.step, kernel_types.kernel_type
),

per_step_metrics as (
    select
        run_id,
        metric,
        median(sample) as value,
        coalesce(mad(sample) / nullif(median(sample), 0), 0) as spread,
        count(*) as steps
    from step_samples
    where sample is not null
    group by run_id, metric
),

peak_memory as (
    select
        run_id,
        'peak_memory_bytes' as metric,
        coalesce(max(peak_allocated_bytes) filter (where device >= 0), max(peak_allocated_bytes))::double as value
    from memory_peaks
    group by run_id
),

metrics as (
    select run_id, metric, value, spread, steps
    from per_step_metrics
    union all
    select run_id, metric, value, null, null
    from peak_memory
    where value is not null
)

select
    metrics.run_id,
    metrics.metric,
    regexp_replace(metrics.run_id, '\.[^.]*$', '') as job,
    runs.first_ts_ns as started_ns,
    metrics.value,
    metrics.spread,
    metrics.steps,
    metrics.metric not in ('step_gpu_utilization_ratio', 'mfu_ratio') as higher_is_worse
from metrics
left join runs using (run_id)
