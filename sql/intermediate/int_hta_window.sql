-- One row per trace: the time window HTA 0.5.0 analyses. HTA works in integer µs relative to the trace's base
-- (ceil(ts), floor(ts + dur)); base_ns is baseTimeNanoseconds, or 0 for legacy absolute-µs traces. HTA rounds the
-- JSON numbers as pandas holds them, float64 µs: where ts carries ns decimals its float64 is coarser than 1 ns once
-- ts is large (0.25 µs for absolute epoch µs), so ceil/floor of the exact ns would differ from HTA by 1 µs on a
-- quarter of the events. The HTA models therefore take ceil/floor of ts's float64 (the nearest double of the
-- exact decimal: one correctly rounded division below 2^53 ns, the whole µs plus the ns fraction above), and of
-- that float64 plus dur's. Integer-µs traces are exact either way. When the trace
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
        max(ceil(case
            when abs(steps.ts_ns - coalesce(traces.base_time_ns, 0)) < 9007199254740992
                then (steps.ts_ns - coalesce(traces.base_time_ns, 0))::double / 1000
            else ((steps.ts_ns - coalesce(traces.base_time_ns, 0)) // 1000)::double
                + ((steps.ts_ns - coalesce(traces.base_time_ns, 0)) % 1000)::double / 1000
        end))::bigint as last_step_start_us
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
