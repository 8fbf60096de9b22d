-- One row per trace: the time window HTA 0.5.0 analyses. HTA works in integer µs relative to the trace's base
-- (ceil(ts), floor(ts + dur)); base_ns is baseTimeNanoseconds, or 0 for legacy absolute-µs traces. When the trace
-- has at least two ProfilerSteps, HTA keeps only CPU events starting before the last step (cutoff_us, in HTA µs)
-- and the GPU events launched by them; otherwise (cutoff_us null) it keeps everything.
-- grain: run_id, trace_id
-- source: holistictraceanalysis 0.5.0 hta/common/trace.py (_filter_irrelevant_gpu_kernels), trace_parser.py
-- (round_down_time_stamps); see ANCHORS.md §2.1
with

step_starts as (
    select
        steps.run_id,
        steps.trace_id,
        count(distinct steps.step) as step_count,
        max((steps.ts_ns - coalesce(traces.base_time_ns, 0) + 999) // 1000) as last_step_start_us
    from steps
    join traces using (run_id, trace_id)
    group by steps.run_id, steps.trace_id
)

select
    traces.run_id,
    traces.trace_id,
    traces.rank,
    coalesce(traces.base_time_ns, 0) as base_ns,
    coalesce(step_starts.step_count, 0) as step_count,
    case when step_starts.step_count >= 2 then step_starts.last_step_start_us end as cutoff_us
from traces
left join step_starts using (run_id, trace_id)
where traces.status != 'failed'
