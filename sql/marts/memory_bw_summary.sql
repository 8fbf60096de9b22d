-- One row per trace and memcpy/memset kind: the bandwidth its operations use together, as HTA's summary.
-- Kinds as HTA names them: the first 11 characters of a Memcpy name (Memcpy HtoD, DtoH, DtoD, PtoP, ...), Memset,
-- or Memcpy Unknown. Each MEMORY-type GPU event (name starting Memcpy, Memset or dma) adds the trace's
-- "memory bandwidth (GB/s)" (0 where absent) at its start and removes it at its end; the running sum per kind in
-- time order is the concurrent bandwidth. Like HTA, the statistics are over the series' change points whose value
-- is above 0 (so idle stretches are left out), not weighted by time; std is the sample standard deviation and the
-- quartiles interpolate linearly (pandas describe). Bandwidth used by compute and NCCL kernels is not included.
-- Mimics HTA 0.5.0: integer-µs timestamps and HTA's window (see int_hta_window); a 0-µs event lasts 1 µs.
-- Deliberate differences: HTA sorts the changes with an unstable sort, so a copy ending in the µs another starts
-- may or may not count as concurrent with it; we order ends before starts, so back-to-back copies never add up.
-- HTA widens only 0-µs events; a sub-µs event whose rounded end falls before its rounded start (-1 µs) is widened
-- to 1 µs here too rather than run backwards. We sum in exact decimals, so a series back at rest is exactly 0,
-- never a float64 residue counted as a positive point.
-- grain: run_id, trace_id, memory_kind
-- source: holistictraceanalysis 0.5.0 hta/analyzers/trace_counters.py::get_memory_bw_summary; see ANCHORS.md §2.3
-- column: memory_kind: HTA's memory operation kind: the first 11 characters of a Memcpy name, Memset, or Memcpy Unknown
-- column: point_count: points of the bandwidth series above 0
-- column: mean_gbps: mean concurrent bandwidth over the points
-- column: std_gbps: sample standard deviation of the concurrent bandwidth over the points
-- column: min_gbps: lowest concurrent bandwidth
-- column: p25_gbps: 25th percentile of the concurrent bandwidth
-- column: p50_gbps: median concurrent bandwidth
-- column: p75_gbps: 75th percentile of the concurrent bandwidth
-- column: max_gbps: highest concurrent bandwidth
with

bandwidths as (
    select run_id, trace_id, event_idx, memory_bandwidth_gbps from gpu_memcpy
    union all
    select run_id, trace_id, event_idx, memory_bandwidth_gbps from gpu_memset
),

memory_events as (
    select
        gpu.run_id,
        gpu.trace_id,
        gpu.rank,
        case
            when starts_with(gpu.name, 'Memset') then 'Memset'
            when starts_with(gpu.name, 'Memcpy') then left(gpu.name, 11)
            else 'Memcpy Unknown'
        end as memory_kind,
        gpu.ts_us,
        gpu.ts_us + greatest(gpu.dur_us, 1) as end_us,
        -- 12 decimals hold any float64 GB/s to far below its own precision and make + and - cancel exactly
        coalesce(bandwidths.memory_bandwidth_gbps, 0)::decimal(38, 12) as gbps
    from int_hta_gpu_events as gpu
    left join bandwidths using (run_id, trace_id, event_idx)
    where gpu.kernel_type = 'MEMORY'
),

bandwidth_changes as (
    select run_id, trace_id, rank, memory_kind, ts_us, gbps as delta_gbps
    from memory_events
    union all
    select run_id, trace_id, rank, memory_kind, end_us, -gbps
    from memory_events
),

bandwidth_series as (
    select
        *,
        (sum(delta_gbps) over (
            partition by run_id, trace_id, memory_kind
            order by ts_us, delta_gbps
            rows between unbounded preceding and current row
        ))::double as gbps
    from bandwidth_changes
)

select
    run_id,
    trace_id,
    memory_kind,
    any_value(rank) as rank,
    count(*) as point_count,
    avg(gbps) as mean_gbps,
    stddev_samp(gbps) as std_gbps,
    min(gbps) as min_gbps,
    quantile_cont(gbps, 0.25) as p25_gbps,
    quantile_cont(gbps, 0.5) as p50_gbps,
    quantile_cont(gbps, 0.75) as p75_gbps,
    max(gbps) as max_gbps
from bandwidth_series
where gbps > 0
group by run_id, trace_id, memory_kind
