-- One row per CPU runtime call (cuda_runtime / cuda_driver / hip / mtia) that HTA 0.5.0 keeps: those starting
-- before the last ProfilerStep when the trace has two or more steps, all of them otherwise. Times in HTA's
-- integer µs relative to the trace base: ts_us = ceil(ts), end_us = floor(ts + dur) in float64 (int_hta_window).
-- grain: run_id, trace_id, event_idx
-- source: holistictraceanalysis 0.5.0 hta/common/trace.py::_filter_irrelevant_gpu_kernels; see ANCHORS.md §2.1
with

as_float as (
    select
        runtime_calls.*,
        hta_window.cutoff_us,
        case
            when abs(runtime_calls.ts_ns - hta_window.base_ns) < 9007199254740992
                then (runtime_calls.ts_ns - hta_window.base_ns)::double / 1000
            else ((runtime_calls.ts_ns - hta_window.base_ns) // 1000)::double
                + ((runtime_calls.ts_ns - hta_window.base_ns) % 1000)::double / 1000
        end as ts_float
    from runtime_calls
    join int_hta_window as hta_window using (run_id, trace_id)
),

rounded as (
    select
        *,
        ceil(ts_float)::bigint as ts_us,
        floor(ts_float + dur_ns::double / 1000)::bigint as end_us
    from as_float
)

select
    run_id,
    trace_id,
    rank,
    event_idx,
    name,
    correlation,
    ts_ns,
    dur_ns,
    ts_us,
    end_us
from rounded
where cutoff_us is null or ts_us < cutoff_us
