-- One row per device activity (kernel, memcpy, memset) with the runtime call that launched it, joined by
-- correlation id, in exact ns; the launch calls are int_launch_calls (a CUDA graph launch is one call whose several
-- kernels share its correlation).
-- grain: run_id, trace_id, source_table, event_idx
-- source: holistictraceanalysis 0.5.0 hta/common/trace_symbol_table.py (runtime launch events); ANCHORS.md §1.2, §2.3
select
    runtime_calls.run_id,
    runtime_calls.trace_id,
    runtime_calls.rank,
    runtime_calls.correlation,
    runtime_calls.name as runtime_name,
    runtime_calls.tid as cpu_tid,
    runtime_calls.ts_ns as cpu_ts_ns,
    runtime_calls.dur_ns as cpu_dur_ns,
    runtime_calls.end_ns as cpu_end_ns,
    device_activity.name as kernel_name,
    device_activity.device,
    device_activity.stream,
    device_activity.kernel_type,
    device_activity.cat as gpu_cat,
    device_activity.ts_ns as gpu_ts_ns,
    device_activity.dur_ns as gpu_dur_ns,
    device_activity.end_ns as gpu_end_ns,
    device_activity.event_idx,
    device_activity.source_table
from runtime_calls
join int_kernels_classified as device_activity using (run_id, trace_id, correlation)
where runtime_calls.name in (select name from int_launch_calls)
