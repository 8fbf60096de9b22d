-- One row per trace and GPU stream: the stream's idle gaps split by cause, as HTA's idle time breakdown. On each
-- stream, kernels/memcpy/memset (not cuda_sync rows) are ordered by start; a gap is start minus the previous
-- event's end. host_wait: the event's launching runtime call started after the previous event ended (the CPU
-- enqueued late); kernel_wait: otherwise, a gap under 30 µs (consecutive_kernel_delay=30, compared in µs);
-- other: every other gap.
-- Deliberate difference: where events on one stream overlap (MTIA ccp events do), the "gap" is negative; HTA adds
-- these negative gaps into kernel_wait, we count them as 0 idle and report their magnitude as overlapping_ns, so
-- HTA's kernel_wait = kernel_wait_ns - overlapping_ns.
-- Mimics HTA 0.5.0: integer-µs timestamps (×1000 here) and HTA's window (see int_hta_window). The launching
-- runtime is found by correlation id among the kept runtime calls.
-- grain: run_id, trace_id, stream
-- differs: HTA: a negative gap between overlapping kernels of one stream is clamped to 0 and reported apart (overlapping_ns), where HTA sums it into kernel_wait.
-- source: holistictraceanalysis 0.5.0 hta/analyzers/breakdown_analysis.py::get_idle_time_breakdown; see ANCHORS.md §2.3
-- column: host_wait_ns: idle because the CPU enqueued the next event late
-- column: kernel_wait_ns: short gaps between kernels
-- column: other_ns: other idle gaps
-- column: overlapping_ns: overlap of events on one stream (HTA counts it as negative kernel wait)
-- column: event_count: events on the stream
with

launch_times as (
    select run_id, trace_id, correlation, min(ts_us) as runtime_ts_us
    from int_hta_runtime
    where correlation is not null
    group by run_id, trace_id, correlation
),

stream_events as (
    select
        events.run_id,
        events.trace_id,
        events.rank,
        events.stream,
        events.ts_us,
        launch_times.runtime_ts_us,
        lag(events.end_us) over (
            partition by events.run_id, events.trace_id, events.stream
            order by events.ts_us, events.source_table, events.event_idx
        ) as prev_end_us
    from int_hta_gpu_events as events
    left join launch_times using (run_id, trace_id, correlation)
    where events.cat in ('kernel', 'Kernel', 'gpu_memset', 'Memset', 'gpu_memcpy', 'Memcpy', 'mtia_ccp_events')
),

gaps as (
    select
        *,
        ts_us - prev_end_us as gap_us,
        case
            when runtime_ts_us > prev_end_us then 'host_wait'
            when ts_us - prev_end_us < 30 then 'kernel_wait'
            else 'other'
        end as idle_category
    from stream_events
)

select
    run_id,
    trace_id,
    stream,
    cast(coalesce(sum(greatest(gap_us, 0)) filter (where idle_category = 'host_wait'), 0) * 1000 as bigint)
        as host_wait_ns,
    cast(coalesce(sum(greatest(gap_us, 0)) filter (where idle_category = 'kernel_wait'), 0) * 1000 as bigint)
        as kernel_wait_ns,
    cast(coalesce(sum(greatest(gap_us, 0)) filter (where idle_category = 'other'), 0) * 1000 as bigint) as other_ns,
    any_value(rank) as rank,
    cast(coalesce(sum(-gap_us) filter (where gap_us < 0), 0) * 1000 as bigint) as overlapping_ns,
    count(*) as event_count
from gaps
group by run_id, trace_id, stream
