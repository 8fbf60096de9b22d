-- One row per event that HTA 0.5.0 analyses as GPU-timeline ("stream != -1"): kernels, memcpy, memset (typed by
-- int_kernels_classified), cuda_sync rows that carry a stream (Stream Sync, Stream Wait Event) and host ops whose
-- args name a stream: torch.compile's Inductor records each Triton kernel launch as a cpu_op with the kernel's
-- stream, and HTA counts that host time as time on the stream (a GPU busy time no kernel had; gpu_metrics and
-- gpu_utilization_timeline count kernels only). The last two are typed by HTA's get_kernel_type on the name, as
-- int_kernels_classified types kernels: names containing "Sync" are OTHER, "Stream Wait Event" and Triton
-- launches COMPUTATION.
-- HTA's window filter: with two or more ProfilerSteps, an event with a correlation id is kept only when a kept
-- runtime call (int_hta_runtime) has that correlation; an event without one counts as a CPU row and is kept when
-- it starts before the last step. Times are HTA's integer µs relative to the trace base, computed as HTA computes
-- them from the JSON numbers (see int_hta_window: ceil of the float64 start, floor of the float64 start + dur), so
-- dur_us can be 0 or negative for sub-µs events exactly as in HTA.
-- grain: run_id, trace_id, source_table, event_idx
-- source: holistictraceanalysis 0.5.0 hta/common/trace.py, hta/utils/utils.py::get_kernel_type; see ANCHORS.md §2.1-2.2
with

other_stream_events as (
    select
        run_id, trace_id, rank, device, stream, name, cat, ts_ns, dur_ns, end_ns, correlation, event_idx,
        'gpu_syncs' as source_table
    from gpu_syncs
    union all
    select
        run_id, trace_id, rank, device, stream, name, cat, ts_ns, dur_ns, end_ns, null as correlation, event_idx,
        'cpu_ops' as source_table
    from cpu_ops
    where stream is not null
),

device_events as (
    select
        run_id, trace_id, rank, device, stream, name, cat, ts_ns, dur_ns, end_ns, correlation, kernel_type,
        event_idx, source_table
    from int_kernels_classified
    union all by name
    select
        *,
        case
            when name like 'nccl%Kernel%' then 'COMMUNICATION'
            when starts_with(name, 'Memcpy') or starts_with(name, 'Memset') or starts_with(name, 'dma') then 'MEMORY'
            when not (contains(name, 'Memcpy') or starts_with(name, 'Memset') or contains(name, 'Sync'))
                then 'COMPUTATION'
            else 'OTHER'
        end as kernel_type
    from other_stream_events
),

launched as (
    select distinct run_id, trace_id, correlation
    from int_hta_runtime
    where correlation is not null
),

as_float as (
    select
        device_events.*,
        hta_window.cutoff_us,
        hta_window.base_ns,
        case
            when abs(device_events.ts_ns - hta_window.base_ns) < 9007199254740992
                then (device_events.ts_ns - hta_window.base_ns)::double / 1000
            else ((device_events.ts_ns - hta_window.base_ns) // 1000)::double
                + ((device_events.ts_ns - hta_window.base_ns) % 1000)::double / 1000
        end as ts_float
    from device_events
    join int_hta_window as hta_window using (run_id, trace_id)
    where device_events.stream is not null
        and device_events.stream != -1
),

rounded as (
    select
        *,
        ceil(ts_float)::bigint as ts_us,
        floor(ts_float + dur_ns::double / 1000)::bigint as end_us
    from as_float
)

select
    rounded.run_id,
    rounded.trace_id,
    rounded.rank,
    rounded.device,
    rounded.stream,
    rounded.name,
    rounded.cat,
    rounded.kernel_type,
    rounded.correlation,
    rounded.ts_ns,
    rounded.dur_ns,
    rounded.end_ns,
    rounded.ts_us,
    rounded.end_us,
    rounded.end_us - rounded.ts_us as dur_us,
    rounded.base_ns,
    rounded.event_idx,
    rounded.source_table
from rounded
left join launched using (run_id, trace_id, correlation)
where rounded.cutoff_us is null
    or (rounded.stream >= 0 and rounded.correlation >= 0 and launched.correlation is not null)
    or (not (rounded.stream >= 0 and coalesce(rounded.correlation, -1) >= 0) and rounded.ts_us < rounded.cutoff_us)
