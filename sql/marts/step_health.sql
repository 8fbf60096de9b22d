-- One row per ProfilerStep#N of a trace (its host range): how healthy the step is.
-- total_ns: the step's host duration. median_ns: the median over the trace's steps; vs_median = total / median;
-- vs_median_ratio = the share of the step above the median, greatest(total - median, 0) / total (0 for a step at or
-- under the median). is_outlier: the trace has three or more steps and the step is over 1.5x or under 1/1.5 of the
-- median. is_warmup: the trace's first step (by time) of two or more, over 1.5x the median of the others (the
-- profiler guide's slow first step: allocator, cuDNN autotuning, lazy init). first_op_gap_ns: the dead window from
-- the step's start to the first cpu_op on the step's thread (the whole step when none starts in it).
-- mean_launch_delay_ns: HTA's runtime delay, kernel start - launch call start, averaged over the device activity
-- launched by calls starting in the step (int_launches); null when none. profiler_overhead_ns: the time inside the
-- step of the profiler's own events: Kineto's `overhead` events (Activity Buffer Request, CUPTI Buffer Flush, ...)
-- and profiler spans other than the whole-window `PyTorch Profiler` one, each clipped to the step and summed.
-- grain: run_id, trace_id, step
-- source: HTA 0.5.0 hta/analyzers/cuda_kernel_analysis.py::get_aten_op_kernels_and_delay (runtime_delay); PyTorch
-- profiler guide (warmup step, dead windows, buffer-request overhead); ANCHORS.md §2.3
with

step_ranges as (
    select run_id, trace_id, rank, step, tid, ts_ns as start_ns, end_ns, dur_ns as total_ns
    from steps
),

ordered as (
    select
        *,
        row_number() over (partition by run_id, trace_id order by start_ns, step) as step_ord,
        count(*) over (partition by run_id, trace_id) as step_count,
        median(total_ns) over (partition by run_id, trace_id) as median_ns
    from step_ranges
),

later_steps as (
    select run_id, trace_id, median(total_ns) as later_median_ns
    from ordered
    where step_ord > 1
    group by run_id, trace_id
),

first_ops as (
    select step_ranges.run_id, step_ranges.trace_id, step_ranges.step, cpu_ops.ts_ns as first_op_ns
    from step_ranges
    asof left join cpu_ops
        on step_ranges.run_id = cpu_ops.run_id
        and step_ranges.trace_id = cpu_ops.trace_id
        and step_ranges.tid = cpu_ops.tid
        and cpu_ops.ts_ns >= step_ranges.start_ns
),

launches_in_steps as (
    select step_ranges.run_id, step_ranges.trace_id, step_ranges.step, launches.gpu_ts_ns - launches.cpu_ts_ns as delay_ns
    from int_launches as launches
    asof join step_ranges
        on launches.run_id = step_ranges.run_id
        and launches.trace_id = step_ranges.trace_id
        and launches.cpu_ts_ns >= step_ranges.start_ns
    where launches.cpu_ts_ns < step_ranges.end_ns
),

launch_delays as (
    select run_id, trace_id, step, avg(delay_ns) as mean_launch_delay_ns
    from launches_in_steps
    group by run_id, trace_id, step
),

overhead_events as (
    select run_id, trace_id, ts_ns, ts_ns + dur_ns as end_ns
    from other_events
    where lower(cat) = 'overhead' and dur_ns > 0
    union all
    select run_id, trace_id, ts_ns, end_ns
    from profiler_spans
    where not starts_with(name, 'PyTorch Profiler') and dur_ns > 0
),

overheads as (
    select
        step_ranges.run_id,
        step_ranges.trace_id,
        step_ranges.step,
        sum(least(overhead_events.end_ns, step_ranges.end_ns) - greatest(overhead_events.ts_ns, step_ranges.start_ns))
            as profiler_overhead_ns
    from overhead_events
    join step_ranges
        on overhead_events.run_id = step_ranges.run_id
        and overhead_events.trace_id = step_ranges.trace_id
        and overhead_events.ts_ns < step_ranges.end_ns
        and overhead_events.end_ns > step_ranges.start_ns
    group by step_ranges.run_id, step_ranges.trace_id, step_ranges.step
)

select
    ordered.run_id,
    ordered.trace_id,
    ordered.step,
    ordered.total_ns,
    greatest(ordered.total_ns - ordered.median_ns, 0) / nullif(ordered.total_ns, 0) as vs_median_ratio,
    ordered.step_count >= 3
        and (ordered.total_ns > 1.5 * ordered.median_ns or ordered.total_ns * 1.5 < ordered.median_ns) as is_outlier,
    coalesce(ordered.step_ord = 1 and ordered.total_ns > 1.5 * later_steps.later_median_ns, false) as is_warmup,
    least(coalesce(first_ops.first_op_ns, ordered.end_ns), ordered.end_ns) - ordered.start_ns as first_op_gap_ns,
    cast(round(launch_delays.mean_launch_delay_ns) as bigint) as mean_launch_delay_ns,
    cast(coalesce(overheads.profiler_overhead_ns, 0) as bigint) as profiler_overhead_ns,
    ordered.rank,
    ordered.start_ns,
    cast(ordered.median_ns as bigint) as median_ns,
    ordered.total_ns / nullif(ordered.median_ns, 0) as vs_median
from ordered
left join later_steps using (run_id, trace_id)
left join first_ops using (run_id, trace_id, step)
left join launch_delays using (run_id, trace_id, step)
left join overheads using (run_id, trace_id, step)
