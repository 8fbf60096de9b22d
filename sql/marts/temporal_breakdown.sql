-- One row per trace with GPU activity: HTA's temporal breakdown of the GPU timeline. kernel = last merged end
-- minus first start over every stream != -1 event (kernels, memcpy, memset, cuda_sync rows with a stream);
-- idle = kernel - union of all events; compute = union of COMPUTATION events; non_compute = the rest
-- (communication, memory, OTHER incl. sync rows). Ratios are shares of kernel_ns.
-- Mimics HTA 0.5.0 exactly: integer-µs timestamps (ceil start, floor end, reported here ×1000 as ns) and
-- HTA's window (last ProfilerStep dropped when there are two or more); see int_hta_window.
-- grain: run_id, trace_id
-- differs: HTA: times stay in ns; an event under a µs, which HTA's integer µs clock gives -1 µs, lasts what the trace says (0 after HTA's rounding).
-- source: holistictraceanalysis 0.5.0 hta/analyzers/breakdown_analysis.py::get_temporal_breakdown; see ANCHORS.md §2.3
-- column: idle_ns: GPU timeline span with nothing running
-- column: compute_ns: computation-kernel time
-- column: non_compute_ns: communication, memory and other GPU time
-- column: kernel_ns: the GPU timeline span (first start to last end)
-- column: idle_ratio: idle_ns / kernel_ns
-- column: compute_ratio: compute_ns / kernel_ns
-- column: non_compute_ratio: non_compute_ns / kernel_ns
with

all_busy as (
    select
        run_id,
        trace_id,
        any_value(rank) as rank,
        arg_max(end_us, ts_us) - min(ts_us) as kernel_us,
        sum(end_us - ts_us) as busy_us
    from int_hta_merged_intervals
    where kernel_set = 'ALL'
    group by run_id, trace_id
),

compute_busy as (
    select
        run_id,
        trace_id,
        sum(end_us - ts_us) as compute_us
    from int_hta_merged_intervals
    where kernel_set = 'COMPUTATION'
    group by run_id, trace_id
),

breakdown as (
    select
        all_busy.run_id,
        all_busy.trace_id,
        all_busy.rank,
        all_busy.kernel_us - all_busy.busy_us as idle_us,
        coalesce(compute_busy.compute_us, 0) as compute_us,
        all_busy.busy_us - coalesce(compute_busy.compute_us, 0) as non_compute_us,
        all_busy.kernel_us
    from all_busy
    left join compute_busy using (run_id, trace_id)
)

select
    run_id,
    trace_id,
    cast(idle_us * 1000 as bigint) as idle_ns,
    cast(compute_us * 1000 as bigint) as compute_ns,
    cast(non_compute_us * 1000 as bigint) as non_compute_ns,
    cast(kernel_us * 1000 as bigint) as kernel_ns,
    idle_us / nullif(kernel_us, 0) as idle_ratio,
    compute_us / nullif(kernel_us, 0) as compute_ratio,
    non_compute_us / nullif(kernel_us, 0) as non_compute_ratio,
    rank
from breakdown
