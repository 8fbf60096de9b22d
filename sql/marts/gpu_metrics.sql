-- One row per GPU of a trace: torch-tb-profiler's GPU summary over [first step start, last step end] of int_steps.
-- On a trace with ProfilerStep#N the steps are tb_plugin's, and so are the figures. Deliberate difference: without
-- it, the steps int_steps finds from the trace (step_rule) cover the device work their launches queued, where
-- tb_plugin's one step is the host ops' span and reads 0 % for a GPU busy after the host is done (inference
-- servers, graph replays). This is the trace's window; run_metrics' step_gpu_utilization_ratio is the median
-- healthy step's instead.
-- Utilization = busy time (union of kernels) / span; Est. SM efficiency = time-weighted min(1, Σ blocks per SM of
-- the running kernels) / span (idle counts 0; null when no kernel has blocks per SM); Est. achieved occupancy =
-- kernel-time-weighted mean of `est. achieved occupancy %` / 100 (idle not counted). Kernels only.
-- grain: run_id, trace_id, device
-- differs: torch-tb-profiler: the window is the steps' as step_breakdown finds them (step_rule), reaching the device work their launches queued, not the host ops' span alone.
-- source: torch-tb-profiler 0.4.3 GPU summary (gpu_metrics_parser.py calculate_gpu_utilization, calculate_approximated_sm_efficiency, calculate_occupancy); ANCHORS.md §3.5
-- column: gpu_utilization_ratio: kernel busy time / span
-- column: est_sm_efficiency_ratio: estimated SM efficiency
-- column: est_achieved_occupancy_ratio: kernel-time-weighted estimated achieved occupancy
-- column: span_start_ns: first step start
-- column: span_end_ns: last step end
-- column: busy_ns: union of kernel time within the span
-- column: step_rule: the rule that found the trace's steps (int_steps): profiler_step, annotation, graph_launch, whole_trace
with

span as (
    select run_id, trace_id, min(start_ns) as span_start_ns, max(end_ns) as span_end_ns, any_value(step_rule) as step_rule
    from int_steps
    group by run_id, trace_id
),

devices_used as (
    select run_id, trace_id, device, any_value(rank) as rank
    from kernels
    where lower(cat) = 'kernel' and device is not null
    group by all
),

busy as (
    select
        int_tb_gpu_segments.run_id,
        int_tb_gpu_segments.trace_id,
        int_tb_gpu_segments.device,
        sum(greatest(0, least(seg_end_ns, span_end_ns) - greatest(seg_start_ns, span_start_ns))) as busy_ns,
        sum(
            sm_efficiency * greatest(0, least(seg_end_ns, span_end_ns) - greatest(seg_start_ns, span_start_ns))
        ) as sm_weighted_ns,
        bool_or(sm_efficiency > 0 and least(seg_end_ns, span_end_ns) > greatest(seg_start_ns, span_start_ns))
            as has_sm_efficiency
    from int_tb_gpu_segments
    join span using (run_id, trace_id)
    group by all
),

occupancy as (
    select
        kernels.run_id,
        kernels.trace_id,
        kernels.device,
        sum(est_achieved_occupancy_pct * (least(end_ns, span_end_ns) - greatest(ts_ns, span_start_ns)))
            / sum(least(end_ns, span_end_ns) - greatest(ts_ns, span_start_ns)) / 100 as occupancy_ratio
    from kernels
    join span using (run_id, trace_id)
    where lower(kernels.cat) = 'kernel'
        and est_achieved_occupancy_pct >= 0
        and least(end_ns, span_end_ns) > greatest(ts_ns, span_start_ns)
    group by all
)

select
    devices_used.run_id,
    devices_used.trace_id,
    devices_used.device,
    busy.busy_ns / nullif(span.span_end_ns - span.span_start_ns, 0) as gpu_utilization_ratio,
    case when busy.has_sm_efficiency then busy.sm_weighted_ns / nullif(span.span_end_ns - span.span_start_ns, 0) end
        as est_sm_efficiency_ratio,
    occupancy.occupancy_ratio as est_achieved_occupancy_ratio,
    devices_used.rank,
    span.span_start_ns,
    span.span_end_ns,
    busy.busy_ns,
    span.step_rule
from devices_used
left join span using (run_id, trace_id)
left join busy using (run_id, trace_id, device)
left join occupancy using (run_id, trace_id, device)
