-- One row per CPU runtime call (cuda_runtime / cuda_driver / hip / mtia) that HTA 0.5.0 keeps: those starting
-- before the last ProfilerStep when the trace has two or more steps, all of them otherwise. Times in HTA's
-- integer µs relative to the trace base: ts_us = ceil(ts), end_us = floor(ts + dur).
-- grain: run_id, trace_id, event_idx
-- source: holistictraceanalysis 0.5.0 hta/common/trace.py::_filter_irrelevant_gpu_kernels; see ANCHORS.md §2.1
select
    runtime_calls.run_id,
    runtime_calls.trace_id,
    runtime_calls.rank,
    runtime_calls.event_idx,
    runtime_calls.name,
    runtime_calls.correlation,
    runtime_calls.ts_ns,
    runtime_calls.dur_ns,
    (runtime_calls.ts_ns - hta_window.base_ns + 999) // 1000 as ts_us,
    (runtime_calls.end_ns - hta_window.base_ns) // 1000 as end_us
from runtime_calls
join int_hta_window as hta_window using (run_id, trace_id)
where hta_window.cutoff_us is null
    or (runtime_calls.ts_ns - hta_window.base_ns + 999) // 1000 < hta_window.cutoff_us
