-- One row per record_function annotation name of a trace (user_annotation ranges on the host, ProfilerStep#N
-- included under their own names, as HTA keeps them), in HTA's whole-µs clock: calls and total_cpu_ns = count and
-- Σ duration of every host range (HTA get_gpu_user_annotation_breakdown(use_gpu_annotation=False) on the trace
-- loaded with include_last_profiler_step=True); total_device_ns = Σ duration of the name's gpu_user_annotation
-- ranges over HTA's window (int_hta_window: those starting before the last ProfilerStep when there are two or
-- more), the span Kineto records on the device for the kernels launched inside the annotation (HTA
-- get_gpu_user_annotation_breakdown(), the default use_gpu_annotation=True, default window); device_kernel_count =
-- kernels launched by the annotation and every op inside it (int_op_nodes).
-- Deliberate difference: HTA's default window leaves out the last step's host annotations too, so a 3-step trace
-- counted 2 forward passes; the window exists for the device side, whose last step the profiler may cut short.
-- Deliberate difference: a trace with no gpu_user_annotation at all (older Kineto, HTA returns nothing) gets the
-- device time of the kernels/memcpy/memset launched inside instead (key_averages' device total of the annotation);
-- device_time_source says which ('gpu_user_annotation' or 'launched_kernels'). Kineto gives a kernel only its
-- innermost annotation on the device, so an annotation whose kernels all lie in an inner one has 0 there, as in HTA.
-- grain: run_id, trace_id, annotation
-- source: holistictraceanalysis 0.5.0 hta/analyzers/breakdown_analysis.py get_gpu_user_annotation_breakdown
with

-- HTA's clock: integer µs from the trace base, start rounded up and end down. HTA's window on the device ranges:
-- with two or more ProfilerSteps only those starting before the last step (an annotation has no correlation, so
-- HTA filters the device ones by start time).
ranges as (
    select
        annotations.* replace (
            coalesce(annotations.on_device, false) as on_device,
            ((annotations.end_ns - hta_window.base_ns) // 1000 - (annotations.ts_ns - hta_window.base_ns + 999) // 1000) * 1000
                as dur_ns
        )
    from annotations
    join int_hta_window as hta_window using (run_id, trace_id)
    where not coalesce(annotations.on_device, false)
        or hta_window.cutoff_us is null
        or (annotations.ts_ns - hta_window.base_ns + 999) // 1000 < hta_window.cutoff_us
),

by_name as (
    select
        run_id,
        trace_id,
        name,
        count(*) filter (where not on_device) as calls,
        coalesce(sum(dur_ns) filter (where not on_device), 0) as cpu_ns,
        coalesce(sum(dur_ns) filter (where on_device), 0) as annotated_device_ns,
        any_value(rank) as rank
    from ranges
    group by all
),

recorded_on_device as (
    select distinct trace_id from ranges where on_device
),

launched as (
    select trace_id, name, sum(device_total_ns) as device_ns, sum(kernel_count) as kernel_count
    from int_op_nodes
    semi join (select trace_id, event_idx from ranges where not on_device) using (trace_id, event_idx)
    where tree = 'torch'
    group by all
)

select
    by_name.run_id,
    by_name.trace_id,
    by_name.name as annotation,
    by_name.calls,
    by_name.cpu_ns::bigint as total_cpu_ns,
    if(recorded.trace_id is not null, by_name.annotated_device_ns, coalesce(launched.device_ns, 0))::bigint
        as total_device_ns,
    coalesce(launched.kernel_count, 0)::bigint as device_kernel_count,
    if(recorded.trace_id is not null, 'gpu_user_annotation', 'launched_kernels') as device_time_source,
    by_name.rank
from by_name
left join launched using (trace_id, name)
left join recorded_on_device as recorded using (trace_id)
